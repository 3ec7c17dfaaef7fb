"""`morphz context ...` subcommands of the recall service (see EXTENSIONS in main.py)."""
from __future__ import annotations

import argparse
from types import MappingProxyType
from typing import Callable


def add_commands(add: Callable[[str, str], argparse.ArgumentParser]) -> list[str]:
    """Add this service's subparsers with add(name, help); return their names."""
    return list(COMMANDS)


# name -> (call(channel, args) -> dict, render(reply, out), exit status of a reply)
COMMANDS: MappingProxyType = MappingProxyType({})
