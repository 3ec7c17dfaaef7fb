"""Control hooks over the target's process: start, stop, SIGKILL, restart.

Either the kit launches the target itself (`--start-cmd`: it keeps the process and
stops it with SIGTERM, kills it with SIGKILL, both to its whole process group), or the
operator gives commands for each (`--stop-cmd`, `--kill-cmd`), e.g. for a service
manager or a container; with both, the start command is one that starts the target in
the background and returns, and the kit waits for it to end. After a start the kit waits until the target answers; after a
stop or kill, until it no longer does.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Optional

from morphz_conformance.driver import NotSupported

READY_BOUND = 90.0  # seconds a start may take before the run gives up on the target


class ControlError(RuntimeError):
    """A control hook could not do its job (the target did not start, a command failed)."""


@dataclass(frozen=True)
class Commands:
    start: str = ""
    stop: str = ""
    kill: str = ""
    lease_stop: str = ""   # SC-Distributed: make the lease service unreachable
    lease_start: str = ""  # and reachable again
    start_small: str = ""  # DUR-07: start the target with little storage space left
    start_other_embedder: str = ""  # HYB-02: start it embedding with another embedder
    start_default_embedder: str = ""  # HYB-04/05: start it with its default embedder
    start_older_rules: str = ""  # DUR-05: start it deciding under an earlier rules version
    backup: str = ""    # DUR-06: take an online backup of the running target's store
    restore: str = ""   # DUR-06: with the target stopped, replace its data by the backup
    promote_standby: str = ""  # DUR-08: lose the primary store, promote a standby
    second_recall_kill: str = ""   # DIST-06: SIGKILL the second recall replica
    second_recall_start: str = ""  # and start it again on its data

    def capabilities(self) -> frozenset[str]:
        caps = set(self._process_capabilities())
        if self.start and self.start_default_embedder:
            caps.add("default_embedder")
        if self.start and self.start_older_rules:
            caps.add("rules")
        if self.start and self.backup and self.restore:
            caps.add("backup")
        if self.promote_standby:
            caps.add("replication")
        if self.second_recall_kill and self.second_recall_start:
            caps.add("recall_replica_restart")
        return frozenset(caps)

    def _process_capabilities(self) -> frozenset[str]:
        caps = {"lease"} if self.lease_stop and self.lease_start else set()
        if self.start and self.start_small:
            caps.add("space")
        if self.start and self.start_other_embedder:
            caps.add("embedder")
        if self.start:
            caps |= {"start", "stop", "kill", "restart"}  # the kit owns the process
            if os.path.isfile("/proc/self/status"):
                caps.add("memory")
        if self.stop:
            caps.add("stop")
        if self.kill:
            caps.add("kill")
        if {"start", "stop"} <= caps:
            caps.add("restart")
        return frozenset(caps)


class ProcessControl:
    """Runs `commands`; `answers()` says whether the target answers a call now."""

    def __init__(self, commands: Commands, answers: Callable[[], bool],
                 log_path: Optional[str] = None) -> None:
        self.commands, self._answers, self._log_path = commands, answers, log_path
        self._proc: Optional[subprocess.Popen] = None

    def capabilities(self) -> frozenset[str]:
        return self.commands.capabilities()

    def start(self, command: str = "") -> None:
        """Start the target (with `command` instead of the start command when given)."""
        command = command or self.commands.start
        if not command:
            raise NotSupported("start")
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(shlex.split(command), stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=log, start_new_session=True)
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        if self.commands.stop and self.commands.kill:
            # The target is stopped and killed by commands of its own: this one starts it in
            # the background (a service manager, scripts/cluster start-process) and is
            # waited for, so that all it does is done before the target is used.
            try:
                code = self._proc.wait(timeout=READY_BOUND)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                raise ControlError(f"the start command did not end within "
                                   f"{READY_BOUND:.0f}s") from None
            if code != 0:
                raise ControlError(f"the start command exited {code}")
        self._wait(lambda: self._answers(), "answer after start",
                   died=lambda: self._proc is not None and self._proc.poll() not in (None, 0))

    def stop(self) -> None:
        if self.commands.stop:
            run_command(self.commands.stop)
        elif self._proc is not None:
            self._signal(signal.SIGTERM)
        else:
            raise NotSupported("stop")
        self._reap()
        self._wait(lambda: not self._answers(), "stop answering after stop")

    def kill(self) -> None:
        if self.commands.kill:
            run_command(self.commands.kill)
        elif self._proc is not None:
            self._signal(signal.SIGKILL)
        else:
            raise NotSupported("kill")
        self._reap()
        self._wait(lambda: not self._answers(), "stop answering after SIGKILL")

    def limit_space(self) -> None:
        """Restart the target with little storage space (the case fills the rest)."""
        if "space" not in self.capabilities():
            raise NotSupported("space")
        self.stop()
        self.start(self.commands.start_small)

    def free_space(self) -> None:
        """Restart the target with its space back."""
        if "space" not in self.capabilities():
            raise NotSupported("space")
        self.stop()
        self.start()

    def restart_with_other_embedder(self) -> None:
        if "embedder" not in self.capabilities():
            raise NotSupported("embedder")
        self.stop()
        self.start(self.commands.start_other_embedder)

    def restart_with_default_embedder(self) -> None:
        if "default_embedder" not in self.capabilities():
            raise NotSupported("default_embedder")
        self.stop()
        self.start(self.commands.start_default_embedder)

    def restart_with_older_rules(self) -> None:
        if "rules" not in self.capabilities():
            raise NotSupported("rules")
        self.stop()
        self.start(self.commands.start_older_rules)

    def backup(self) -> None:
        """Take an online backup: the target keeps serving while the command runs."""
        if "backup" not in self.capabilities():
            raise NotSupported("backup")
        run_command(self.commands.backup, timeout=600)

    def restore_backup(self) -> None:
        """Stop the target, replace its data by the last backup, start it again."""
        if "backup" not in self.capabilities():
            raise NotSupported("backup")
        self.stop()
        run_command(self.commands.restore, timeout=600)
        self.start()

    def promote_standby(self) -> None:
        if "replication" not in self.capabilities():
            raise NotSupported("replication")
        run_command(self.commands.promote_standby, timeout=600)
        self._wait(self._answers, "answer after a standby's promotion")

    def memory(self) -> int:
        """SEC-08: the anonymous memory (RssAnon, bytes) of the target the kit launched:
        every process of its process group, from Linux's /proc."""
        if self._proc is None or self._proc.poll() is not None:
            raise NotSupported("memory")
        total, found = 0, False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    pgid = int(f.read().rpartition(")")[2].split()[2])
                if pgid != self._proc.pid:
                    continue
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            total += int(line.split()[1]) * 1024
                            found = True
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
        if not found:
            raise NotSupported("memory")
        return total

    def lose_leases(self) -> None:
        if "lease" not in self.capabilities():
            raise NotSupported("lease")
        run_command(self.commands.lease_stop)

    def restore_leases(self) -> None:
        if "lease" not in self.capabilities():
            raise NotSupported("lease")
        run_command(self.commands.lease_start)

    def close(self) -> None:
        """Stop what the kit launched (at the end of a run)."""
        if self._proc is not None and self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait(timeout=30)
        self._proc = None

    def _signal(self, sig: int) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, sig)
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait(timeout=30)
            self._proc = None

    @staticmethod
    def _wait(done: Callable[[], bool], what: str,
              died: Callable[[], bool] = lambda: False) -> None:
        wait_until(done, what, died)


def wait_until(done: Callable[[], bool], what: str,
               died: Callable[[], bool] = lambda: False) -> None:
    """Wait (bounded by READY_BOUND) until done(); `what` names it in the error."""
    deadline = time.monotonic() + READY_BOUND
    while not done():
        if died():
            raise ControlError(f"the target exited before it would {what}")
        if time.monotonic() > deadline:
            raise ControlError(f"the target did not {what} within {READY_BOUND:.0f}s")
        time.sleep(0.1)


def run_command(command: str, timeout: float = 120) -> None:
    """Run a control command to its end; ControlError if it fails."""
    done = subprocess.run(shlex.split(command), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)
    if done.returncode != 0:
        # The command's own output is not echoed: it could carry credentials.
        raise ControlError(f"control command exited {done.returncode}")
