"""`make demo`: every known failure, on upstream diffusers and with diffusers-patched, side by side."""

import sys

from tests.support.scenarios import SCENARIOS, run_scenarios


def _cell(scenario, outcome, width=70):
    text = ("ok: " if outcome.ok else "FAILS: ") + outcome.describe(scenario).splitlines()[0]
    return text if len(text) <= width else text[: width - 3] + "..."


def main(names=None):
    names = names or list(SCENARIOS)
    print(
        f"running {len(names)} scenarios on upstream diffusers (DIFFUSERS_PATCHED=0) ...", file=sys.stderr, flush=True
    )
    upstream = run_scenarios(names, patched=False)
    print(f"running {len(names)} scenarios with diffusers-patched ...", file=sys.stderr, flush=True)
    patched = run_scenarios(names, patched=True)
    rows = [(name, upstream[name], patched[name]) for name in names]
    print("| scenario | upstream diffusers | diffusers-patched | time (upstream / patched) |")
    print("|---|---|---|---|")
    for name, upstream, patched in rows:
        scenario = SCENARIOS[name]
        print(
            f"| {name} | {_cell(scenario, upstream)} | {_cell(scenario, patched)} "
            f"| {upstream.seconds:.1f} s / {patched.seconds:.1f} s |"
        )
    for name, upstream, patched in rows:
        scenario = SCENARIOS[name]
        print(
            f"\n{name} ({scenario.patch}):\n  upstream: {upstream.describe(scenario)}\n"
            f"  patched:  {patched.describe(scenario)}"
        )
    if not all(patched.ok for _, _, patched in rows):
        sys.exit("some scenarios fail even with diffusers-patched")


if __name__ == "__main__":
    main(sys.argv[1:])
