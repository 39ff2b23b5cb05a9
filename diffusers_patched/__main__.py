from .status import main


main()
