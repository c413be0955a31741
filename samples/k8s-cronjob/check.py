"""Checks cronjob.yaml without a Kubernetes cluster: the manifest parses and is the CronJob
its header describes, and its container's command line, as written (only the dls binary's
path is swapped for the given one), run by as many processes at once as a firing starts
pods, against a real node it starts, runs the job once in the slot; firing again in the same
slot runs nothing.

  python3 check.py --dls /path/to/dls
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
RAN = re.compile(r"^slot (\d+) attempt (\d+): nightly report by (\S+) \(token (\d+)\)$")


def manifest():
    docs = list(yaml.safe_load_all(open(os.path.join(HERE, "cronjob.yaml"))))
    assert [d["kind"] for d in docs] == ["CronJob"], "one CronJob"
    cron = docs[0]["spec"]
    assert cron["concurrencyPolicy"] == "Forbid"
    job = cron["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    command = c["command"]
    assert command[:2] == ["/usr/local/bin/dls", "lock"], command
    sep = command.index("--")
    flags = command[2:sep]
    assert flags[flags.index("--once-per") + 1] == "5m" and cron["schedule"] == "*/5 * * * *", "the slot is the schedule's period"
    assert "--skip-if-locked" in flags
    env = {e["name"] for e in c["env"]}
    assert {"DLS_ENDPOINTS", "DLS_CA_FILE", "CAERUS_API_KEY"} <= env, env
    assert job["parallelism"] >= 2, "a firing starts several pods ('hosts')"
    return command, job["parallelism"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fire(command, pods, endpoints):
    """Starts `pods` processes of the command at once; their exit codes and the runs they printed."""
    procs = []
    for i in range(pods):
        env = dict(os.environ, DLS_ENDPOINTS=endpoints, HOSTNAME=f"nightly-report-pod-{i}")
        env.pop("DLS_CA_FILE", None)  # the local node speaks plain text; the pods' TLS settings are the manifest's
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    codes, runs = [], []
    for p in procs:
        out, err = p.communicate(timeout=60)
        codes.append(p.returncode)
        runs += [RAN.match(line).groups() for line in out.splitlines() if RAN.match(line)]
        if p.returncode != 0:
            print(err, file=sys.stderr)
    return codes, runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dls", required=True, help="the dls binary: starts a single-node server and stands in for /usr/local/bin/dls")
    args = ap.parse_args()
    command, pods = manifest()
    print(f"[check] cronjob.yaml: a CronJob, Forbid, {pods} pods per firing, each: {' '.join(command[:command.index('--')])} -- ...")
    command = [os.path.abspath(args.dls)] + command[1:]
    work = tempfile.mkdtemp(prefix="caerus-k8s-cronjob-")
    endpoints = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen([args.dls, "serve", "--listen", endpoints, "--http-listen", f"127.0.0.1:{free_port()}",
                               "--data-dir", os.path.join(work, "dls")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        subprocess.run([args.dls, "lock", "--wait-timeout", "5s", "--endpoints", endpoints, "check", "ready", "--", "true"],
                       check=True, timeout=30, stdout=subprocess.DEVNULL)
        codes, first = fire(command, pods, endpoints)
        for slot, attempt, host, token in first:
            print(f"[check] first firing: slot {slot} ran on {host} (attempt {attempt}, token {token})")
        assert codes == [0] * pods, f"exit codes {codes}"
        assert len(first) == 1, f"{pods} pods at once ran the job {len(first)} times: {first}"
        codes, again = fire(command, pods, endpoints)
        assert codes == [0] * pods, f"exit codes {codes}"
        # The same slot again (or, if the 5-minute boundary passed meanwhile, the next one once).
        assert all(slot != first[0][0] for slot, *_ in again) and len(again) <= 1, f"second firing ran {again}"
        print(f"[check] second firing: {len(again)} runs ({'slot ' + first[0][0] + ' already ran' if not again else 'a new slot'}) -> PASS")
        return 0
    except AssertionError as e:
        print(f"[check] FAIL: {e}")
        return 1
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
