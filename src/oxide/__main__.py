"""`python -m oxide ...` is the `oxide` command (for environments without the console script)."""

from oxide.cli.main import main

main()
