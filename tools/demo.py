"""`make demo`: every known failure, on upstream diffusers and with diffusers-patched, side by side."""

import argparse
import re
import sys

from diffusers_patched.selftest import parity
from diffusers_patched.selftest.judges import FAILS, holds
from diffusers_patched.selftest.scenarios import SCENARIOS, run_scenarios
from tools import REPO_ROOT, ToolError, patches, wheels


def _cell(scenario, outcome, width=100):
    verdict, figure = outcome.verdict(scenario)
    text = f"{verdict}: {figure.splitlines()[0]}"
    if len(text) <= width:
        return text
    # A cut figure keeps the bound it ends with (judges.py): "(tolerance 1e-05)" or "(bit for bit)".
    head, bound = re.fullmatch(r"(.*?)((?: \((?:tolerance [^()]*|bit for bit)\))?)", text).groups()
    return head[: width - 3 - len(bound)] + "..." + bound


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.demo", description=__doc__)
    parser.add_argument("names", nargs="*", help="scenarios (default: all)")
    parser.add_argument("--release", help="another supported diffusers release: its wheel over the verified stack")
    args = parser.parse_args(argv)
    names = args.names or list(SCENARIOS)
    site, recorded = None, {}
    if args.release:
        project = patches.Project(REPO_ROOT)
        try:
            site = wheels.release_site(project, args.release)
        except ToolError as e:
            sys.exit(f"error: {e}")
        # Scenarios that behave differently on that release, and why (releases.json `scenarios`).
        recorded = project.release_record(args.release).get("scenarios", {})
    release = args.release or "the installed diffusers"
    print(
        f"running {len(names)} scenarios on upstream diffusers ({release}, DIFFUSERS_PATCHED=0) ...",
        file=sys.stderr,
        flush=True,
    )
    upstream = run_scenarios(names, patched=False, site=site)
    print(f"running {len(names)} scenarios with diffusers-patched ({release}) ...", file=sys.stderr, flush=True)
    patched = run_scenarios(names, patched=True, site=site)
    rows = [(name, upstream[name], patched[name]) for name in names]
    print(
        "Each side's verdict: right (equal to an independent reference: the un-offloaded model, the correctly loaded "
        "one, the constructor's values, the right plan; outputs of computations within the tolerance, what nothing "
        "computes bit for bit), wrong (other numbers, returned without an error), refused "
        "(stopped with an error naming the problem, where that is the right outcome), fails (raised).\n"
    )
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
        if "patched" in recorded.get(name, {}):
            print(f"  differs on {args.release}: {recorded[name]['patched']}")
    not_right = [
        name
        for name, _, patched in rows
        if not holds(patched.verdict(SCENARIOS[name])[0]) and "patched" not in recorded.get(name, {})
    ]
    breaks = [] if args.names else _parity_table(release, site)
    if not_right:
        sys.exit(f"not right with diffusers-patched: {', '.join(not_right)}")
    if breaks:
        sys.exit(f"worse than upstream with diffusers-patched: {', '.join(breaks)}")


def _parity_table(release, site):
    """The parity net (diffusers_patched/selftest/parity.py): the flows each quantization backend documents, on both
    sides. Returns the cells where the patched side is worse than upstream."""
    names = list(parity.PARITY)
    print(f"running the parity net on both sides ({release}) ...", file=sys.stderr, flush=True)
    module = "diffusers_patched.selftest.parity"
    upstream = run_scenarios(names, patched=False, module=module, site=site)
    patched = run_scenarios(names, patched=True, module=module, site=site)
    print(
        "\nNever worse than upstream: each quantization backend's documented flows, on upstream and with "
        "diffusers-patched; wherever upstream is right, the patched side must be right with upstream's outputs.\n"
    )
    print("| backend | flow | upstream diffusers | diffusers-patched |")
    print("|---|---|---|---|")
    breaks = []
    for name in names:
        upstream_verdicts, patched_verdicts = parity.cell_verdicts(upstream[name]), parity.cell_verdicts(patched[name])
        for flow in upstream_verdicts:
            cells = [
                f"{verdict}: {figure}"[:100]
                for verdict, figure in (upstream_verdicts[flow], patched_verdicts.get(flow, (FAILS, "not run")))
            ]
            print(f"| {name} | {flow} | {cells[0]} | {cells[1]} |")
        breaks += [f"{name} / {flow}" for flow in parity.parity_breaks(upstream[name], patched[name])]
    return breaks


if __name__ == "__main__":
    main()
