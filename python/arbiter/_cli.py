"""The `arbiter` command of a pip-installed package: the CLI program shipped inside it."""

import os
import sys


def main() -> None:
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "arbiter")
    os.execv(program, [program, *sys.argv[1:]])


if __name__ == "__main__":
    main()
