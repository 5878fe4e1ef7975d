#!/usr/bin/env python3
"""Runs docker/compose.yaml with podman where no compose engine can: Debian
12's podman-compose (1.0.3) adds a bridge network of its own to every
service beside `network_mode: host` and does not wait for `depends_on`
conditions, and no Docker engine runs on these machines. This reads the same
file (nothing of the deployment is written twice) and does what `docker
compose` does with the keys it uses, refusing any other key:

    image, build {context, dockerfile}, command, environment, volumes
    (named, or ./relative binds, :ro), network_mode: host,
    healthcheck {disable}, depends_on (a list, or conditions
    service_started, service_healthy, service_completed_successfully),
    ${VAR} and ${VAR:-default} from the environment.

    docker/compose-run.py [-f FILE] [-p PROJECT] [--context SERVICE=DIR] build [SERVICE...]
    docker/compose-run.py [-f FILE] [-p PROJECT] up [--timeout S]
    docker/compose-run.py [-f FILE] [-p PROJECT] ps | logs SERVICE | down

Containers are named PROJECT-SERVICE, volumes PROJECT_VOLUME; `down` removes
both. Images are built --network=host --pull=never (the base image is the
local debian:bookworm-slim docker/build.sh makes). With CONTAINER_STATE set,
podman uses docker/build.sh's private configuration there (its env.sh).
Exit status: 0, or 1 with one line naming what failed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

KNOWN_SERVICE_KEYS = {"image", "build", "command", "environment", "volumes", "network_mode",
                      "healthcheck", "depends_on"}
CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")


class Fail(Exception):
    pass


def interpolate(value, env):
    """${VAR} and ${VAR:-default}, as compose does."""
    def sub(m):
        name, default = m.group(1), m.group(3)
        v = env.get(name)
        if default is not None and not v:
            return default
        return v or ""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", sub, value)


def walk(x, env):
    if isinstance(x, str):
        return interpolate(x, env)
    if isinstance(x, list):
        return [walk(v, env) for v in x]
    if isinstance(x, dict):
        return {k: walk(v, env) for k, v in x.items()}
    return x


def load(path):
    try:
        import yaml
    except ImportError:
        raise Fail("python3-yaml is needed (apt-get install python3-yaml)")
    with open(path) as f:
        doc = yaml.safe_load(f)
    doc = walk(doc, os.environ)
    services = doc.get("services") or {}
    for name, s in services.items():
        extra = set(s) - KNOWN_SERVICE_KEYS
        if extra:
            raise Fail("service %s: %s not handled by this runner" % (name, ", ".join(sorted(extra))))
        if s.get("network_mode", "host") != "host":
            raise Fail("service %s: only network_mode: host is handled" % name)
        for dep, cond in deps(s).items():
            if dep not in services:
                raise Fail("service %s depends on %s, which is not in the file" % (name, dep))
            if cond not in CONDITIONS:
                raise Fail("service %s: condition %s not handled" % (name, cond))
    return doc


def deps(s):
    d = s.get("depends_on") or {}
    if isinstance(d, list):
        return {k: "service_started" for k in d}
    return {k: (v or {}).get("condition", "service_started") for k, v in d.items()}


def order(services):
    """The services, each after what it depends on."""
    out, seen = [], set()

    def visit(n, path):
        if n in seen:
            return
        if n in path:
            raise Fail("depends_on has a cycle through %s" % n)
        for d in deps(services[n]):
            visit(d, path + [n])
        seen.add(n)
        out.append(n)
    for n in services:
        visit(n, [])
    return out


def podman(*args, check=True, timeout=600, capture=True):
    r = subprocess.run(["podman"] + list(args), capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        err = (r.stderr or "").strip().splitlines()
        raise Fail("podman %s: %s" % (" ".join(args[:2]), err[-1] if err else "exit %d" % r.returncode))
    return r


def cname(project, service):
    return "%s-%s" % (project, service)


def run_args(doc, project, name, base):
    s = doc["services"][name]
    args = ["run", "-d", "--name", cname(project, name), "--network", "host",
            "--label", "pdbsym.compose.project=" + project, "--label", "pdbsym.compose.service=" + name]
    env = s.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    for k, v in env.items():
        args += ["-e", "%s=%s" % (k, v)]
    for v in s.get("volumes") or []:
        parts = v.split(":")
        src = parts[0]
        if src.startswith(".") or src.startswith("/"):
            src = os.path.normpath(os.path.join(base, src))
        else:
            if src not in (doc.get("volumes") or {}):
                raise Fail("service %s: volume %s is not declared" % (name, src))
            src = "%s_%s" % (project, src)
        args += ["-v", ":".join([src] + parts[1:])]
    if (s.get("healthcheck") or {}).get("disable"):
        args.append("--no-healthcheck")
    args.append(s["image"])
    cmd = s.get("command")
    if isinstance(cmd, str):
        cmd = ["sh", "-c", cmd]
    return args + (cmd or [])


def state(project, name):
    r = podman("inspect", cname(project, name), check=False)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)[0]["State"]


def wait_for(project, dep, cond, deadline):
    while True:
        st = state(project, dep)
        if st is None:
            raise Fail("%s: no such container" % dep)
        if cond == "service_started" and (st.get("Running") or st.get("Status") == "exited"):
            return
        if cond == "service_completed_successfully" and not st.get("Running"):
            if st.get("ExitCode") != 0:
                raise Fail("%s exited with %s" % (dep, st.get("ExitCode")))
            return
        if cond == "service_healthy":
            if not st.get("Running"):
                raise Fail("%s stopped before it was healthy (exit %s)" % (dep, st.get("ExitCode")))
            if podman("healthcheck", "run", cname(project, dep), check=False).returncode == 0:
                return
        if time.monotonic() > deadline:
            raise Fail("%s: not %s in time" % (dep, cond.replace("service_", "")))
        time.sleep(1)


def up(doc, project, base, timeout):
    for v in doc.get("volumes") or {}:
        vn = "%s_%s" % (project, v)
        if podman("volume", "exists", vn, check=False).returncode != 0:
            podman("volume", "create", vn)
    services = doc["services"]
    for name in order(services):
        for dep, cond in deps(services[name]).items():
            wait_for(project, dep, cond, time.monotonic() + timeout)
        podman("rm", "-f", cname(project, name), check=False)
        podman(*run_args(doc, project, name, base))
        print("started %s" % cname(project, name), flush=True)


def down(doc, project):
    r = podman("ps", "-a", "-q", "--filter", "label=pdbsym.compose.project=" + project, check=False)
    ids = r.stdout.split()
    if ids:
        podman("rm", "-f", "-t", "10", *ids, check=False)
    for v in doc.get("volumes") or {}:
        podman("volume", "rm", "-f", "%s_%s" % (project, v), check=False)


def build(doc, base, only, contexts):
    done = set()
    for name, s in doc["services"].items():
        b = s.get("build")
        if not b or (only and name not in only) or s["image"] in done:
            continue
        ctx = contexts.get(name) or os.path.normpath(os.path.join(base, b.get("context", ".")))
        dockerfile = os.path.normpath(os.path.join(base, b.get("context", "."), b.get("dockerfile", "Dockerfile")))
        print("building %s (%s)" % (s["image"], os.path.relpath(dockerfile, base)), flush=True)
        podman("build", "--pull=never", "--network=host", "--format", "docker", "-f", dockerfile,
               "-t", s["image"], ctx, timeout=1800)
        done.add(s["image"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="docker/compose.yaml with podman (see this file's head)")
    ap.add_argument("-f", "--file", default=os.path.join(here, "compose.yaml"))
    ap.add_argument("-p", "--project", default="pdbsym")
    ap.add_argument("--context", action="append", default=[], metavar="SERVICE=DIR",
                    help="build SERVICE from DIR instead of its context (its Dockerfile stays)")
    ap.add_argument("command", choices=["build", "up", "down", "ps", "logs"])
    ap.add_argument("services", nargs="*")
    ap.add_argument("--timeout", type=float, default=300, help="seconds to wait for each dependency")
    a = ap.parse_args()
    st = os.environ.get("CONTAINER_STATE")
    if st and os.path.exists(os.path.join(st, "env.sh")):
        for ln in open(os.path.join(st, "env.sh")):
            m = re.match(r"export (\w+)=(.*)$", ln.strip())
            if m:
                os.environ[m.group(1)] = m.group(2)
    try:
        doc = load(a.file)
        base = os.path.dirname(os.path.abspath(a.file))
        if a.command == "build":
            build(doc, base, a.services, dict(c.split("=", 1) for c in a.context))
        elif a.command == "up":
            up(doc, a.project, base, a.timeout)
        elif a.command == "down":
            down(doc, a.project)
        elif a.command == "ps":
            for name in doc["services"]:
                s = state(a.project, name)
                print("%-16s %s" % (name, "-" if s is None else s.get("Status")))
        elif a.command == "logs":
            for name in a.services or list(doc["services"]):
                r = podman("logs", cname(a.project, name), check=False)
                sys.stdout.write(r.stdout + r.stderr)
    except (Fail, OSError, subprocess.TimeoutExpired) as e:
        print("compose-run: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
