"""What the local Java services (Apache Kafka 0.9 with ZooKeeper, Apache Kafka in KRaft mode) have in common.

Their jars live in the project's cache (``$REBALANCE_TRACKER_CACHE``, else ``$XDG_CACHE_HOME/rebalance-tracker``,
else ``~/.cache/rebalance-tracker``). Each running set of services owns a scratch directory (configuration, data,
one ``NAME.out`` log a process) and its Java processes, which the kernel stops when our process dies
(``_die_with_parent``). The directory goes when they stop: by ``stop()``, or, when our process dies before it could
call it (SIGTERM, SIGKILL), by a small ``sh`` that waits for the pipe from us to close and the processes to exit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from streaming.local.broker import BrokerError, _die_with_parent

# Short-lived local services: a small heap, no tiered compilation beyond C1 (they start faster), a serial collector.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def cache_dir() -> Path:
    return Path(
        os.environ.get("REBALANCE_TRACKER_CACHE")
        or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rebalance-tracker")
    )


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise BrokerError("Apache Kafka needs Java on PATH (a JDK or JRE 17 or newer)")
    return path


def write_properties(path: Path, settings: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


# Reads pids, one a line, until the pipe from the owner closes (it stopped them, or it died); gives each up to 30 s
# to exit (a dead owner's processes are being SIGTERMed by the kernel meanwhile), then removes the directory.
_REAPER = """
pids=
while read -r pid; do pids="$pids $pid"; done
for pid in $pids; do
  n=0
  while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null; sleep 0.5; fi
done
rm -rf -- "$1"
"""


class ScratchDir:
    """A temporary directory that outlives neither its processes nor, for long, our process."""

    def __init__(self, prefix: str):
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        # Its own process group: a Ctrl-C meant for us must not stop it before it has cleaned up.
        self._reaper = subprocess.Popen(
            ["sh", "-c", _REAPER, "scratch-reaper", str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=os.setpgrp,
            text=True,
        )

    def watch(self, pid: int) -> None:
        """Wait for this process before removing the directory, should our process die first."""
        self._reaper.stdin.write(f"{pid}\n")
        self._reaper.stdin.flush()

    def remove(self) -> None:
        """Remove it now (its processes have stopped)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._reaper.stdin and not self._reaper.stdin.closed:
            self._reaper.stdin.close()
        self._reaper.wait()


@dataclass
class JavaServices:
    """Java processes sharing one scratch directory, stopped in the reverse of their start order."""

    scratch: ScratchDir
    processes: list[subprocess.Popen] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @property
    def workdir(self) -> Path:
        return self.scratch.path

    def start_java(
        self,
        name: str,
        classpath: str,
        main_class: str,
        args: list[str],
        heap: str,
        system_properties: dict | None = None,
    ) -> subprocess.Popen:
        """``java -cp CLASSPATH MAIN ARGS`` in the scratch directory, its output in ``NAME.out``."""
        flags = [f"-Xmx{heap}", *JVM_FLAGS, *(f"-D{k}={v}" for k, v in (system_properties or {}).items())]
        with open(self.workdir / f"{name}.out", "wb") as out:
            proc = subprocess.Popen(
                [java(), *flags, "-cp", classpath, main_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                preexec_fn=_die_with_parent,
            )
        self.processes.append(proc)
        self.names.append(name)
        self.scratch.watch(proc.pid)
        return proc

    def stop(self, timeout_s: float = 10.0) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.scratch.remove()

    def running(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of each process's output, in start order, for an error message."""
        logs = [self.workdir / f"{name}.out" for name in self.names]
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in logs if p.exists())
