"""A real single-node SLURM cluster on loopback, for the workflow's SLURM test.

Uses Debian's slurmctld, slurmd, slurm-client and munge (CI installs them; see .ci/run).
The daemons run in the foreground of child processes and are stopped by their PID.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


def missing_tools() -> list[str]:
    return [tool for tool in NEEDED if shutil.which(tool) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_munge() -> subprocess.Popen | None:
    """munged, unless one already answers. Returns the process we started, if any."""
    if MUNGE_SOCKET.exists() and subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
        return None
    for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "munge", "munge")
    proc = subprocess.Popen(
        ["runuser", "-u", "munge", "--", shutil.which("munged"), "--foreground"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 20
    while not MUNGE_SOCKET.exists() and time.time() < deadline:
        time.sleep(0.1)
    return proc


def write_config(folder: Path) -> tuple[Path, int]:
    host = socket.gethostname().split(".")[0]
    ctld_port = free_port()
    node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True)
    # Declare 4 CPUs on the 2-core machine: the test's jobs mostly wait (start-up, status
    # polling), so letting four run at once shortens the test without changing what it checks.
    node_line = re.sub(
        r"CPUs=\d+ Boards=\d+ SocketsPerBoard=\d+ CoresPerSocket=\d+ ThreadsPerCore=\d+",
        "CPUs=4",
        node.stdout.splitlines()[0],
    )
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    conf = folder / "slurm.conf"
    conf.write_text(f"""ClusterName=attnio
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmctldParameters=enable_configless
SlurmdParameters=config_overrides
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
{node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    return conf, ctld_port


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def cluster(folder: Path):
    """Yield the environment (SLURM_CONF) of a running one-node cluster. slurmd runs
    configless (it fetches the configuration from slurmctld and caches it where commands
    inside jobs find it), because Snakemake's job steps drop SLURM_* variables."""
    conf, ctld_port = write_config(folder)
    env = dict(os.environ, SLURM_CONF=str(conf))
    munge = start_munge()
    ctld = slurmd = None
    try:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        ctld = subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env, **quiet)
        time.sleep(1)
        node_env = {k: v for k, v in env.items() if k != "SLURM_CONF"}
        slurmd = subprocess.Popen(
            ["slurmd", "-D", "--conf-server", f"127.0.0.1:{ctld_port}"], env=node_env, **quiet
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env)
            if state.stdout.strip() in ("idle", "mixed"):
                break
            time.sleep(0.5)
        else:
            log = (folder / "slurmctld.log").read_text() if (folder / "slurmctld.log").exists() else ""
            raise RuntimeError(
                f"the SLURM node never became idle: {state.stdout} {state.stderr} {log[-2000:]}"
            )
        yield env
    finally:
        _stop(slurmd)
        _stop(ctld)
        _stop(munge)
        forget_cached_config(folder)


CONFIGLESS_LINK = Path("/run/slurm/conf")


def forget_cached_config(folder: Path) -> None:
    """Configless slurmd points /run/slurm/conf at its cache. Left behind, every later SLURM
    client — the Snakemake SLURM plugin runs ``scontrol show config`` when it loads — keeps
    retrying the stopped controller for about 9 s."""
    if CONFIGLESS_LINK.is_symlink() and str(folder) in os.readlink(CONFIGLESS_LINK):
        CONFIGLESS_LINK.unlink()
