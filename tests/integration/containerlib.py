"""What the container tests (test_docker.py, test_compose.py) share: the
opt-in and its prerequisites, the podman state folder kept between runs,
building docker/Dockerfile with docker/build.sh, podman with that folder's
private configuration, and leaving no mount behind.

The state folder (podman's storage and configuration, the debootstrapped
base) is kept between runs in /var/cache/pdbsym-container/KEY, KEY a hash of
docker/Dockerfile and docker/build.sh (the files the image is built from), so
a later run debootstraps nothing and finds the build's layers cached; a
folder of another key (an older recipe) is removed, so one is kept. Set
CONTAINER_STATE to a folder of your own to use that instead. Nothing goes to
/tmp."""
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import harness
from pdbsym_server import free_port  # noqa: F401 (the container tests take it from here)

CACHE_ROOT = "/var/cache/pdbsym-container"
skip = harness.skip


def debian_mirror():
    src = "/etc/apt/sources.list.d/debian.sources"
    if os.path.exists(src):
        for ln in open(src):
            if ln.startswith("URIs:"):
                return ln.split()[1]
    if os.path.exists("/etc/apt/sources.list"):
        for ln in open("/etc/apt/sources.list"):
            m = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+://\S+)", ln)
            if m and "security" not in ln:
                return m.group(1)
    return None


def require(root, what):
    """The opt-in and the prerequisites of a container test (a skip, or a
    failure under CI, naming what is missing)."""
    if os.environ.get("PDBSYM_TEST_CONTAINER") != "1" and not harness.under_ci():
        harness.opt_in("%s: set PDBSYM_TEST_CONTAINER=1 (as root; installs podman, buildah, runc, "
                       "debootstrap; a first run takes minutes)" % what)
    if os.geteuid() != 0:
        skip("podman builds and runs images as root here (not root)")
    if not shutil.which("bash") or not os.path.exists(os.path.join(root, "docker", "build.sh")):
        skip("docker/build.sh absent")
    mirror = debian_mirror()
    if not mirror:
        skip("no Debian mirror in /etc/apt/sources.list*")
    try:
        urllib.request.urlopen(mirror.rstrip("/") + "/dists/bookworm/Release", timeout=15).read(1)
    except Exception as e:
        skip("no network to the Debian mirror %s (%s)" % (mirror, e))


def state_key(root):
    """A hash of the files the image is built from."""
    h = hashlib.sha256()
    for rel in ("docker/Dockerfile", "docker/build.sh"):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def mounts_under(folder):
    """Mount points at or under folder, deepest first (/proc/self/mountinfo)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            mp = ln.split()[4].encode().decode("unicode_escape")
            if mp == folder or mp.startswith(folder + "/"):
                out.append(mp)
    return sorted(set(out), key=len, reverse=True)


def unmount_all(folder):
    """Unmounts what podman mounted under folder; returns the mounts that
    would not go."""
    for _ in range(3):
        left = mounts_under(folder)
        if not left:
            break
        for mp in left:
            subprocess.run(["umount", mp], capture_output=True)
    for mp in mounts_under(folder):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    return mounts_under(folder)


def state_folder(root):
    """The state folder: the caller's if given, else the one of this recipe's
    key (a folder of another key, not in use, is an older recipe's: removed)."""
    if os.environ.get("CONTAINER_STATE"):
        state = os.environ["CONTAINER_STATE"]
    else:
        key = state_key(root)
        os.makedirs(CACHE_ROOT, exist_ok=True)
        for old in os.listdir(CACHE_ROOT):
            path = os.path.join(CACHE_ROOT, old)
            if old == key or not os.path.isdir(path):
                continue
            try:
                with open(os.path.join(path, "lock"), "a") as lk:
                    fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)  # docker/build.sh holds it while it builds
                    if not unmount_all(path):
                        shutil.rmtree(path, ignore_errors=True)
                        print("removed the state of an older recipe: %s" % path)
            except OSError:
                pass
        state = os.path.join(CACHE_ROOT, key)
    os.makedirs(state, exist_ok=True)
    state = os.path.realpath(state)
    reused = os.path.exists(os.path.join(state, "base.tar"))
    print("state folder: %s (%s)" % (state, "a base image from an earlier run" if reused else "new"))
    return state


def first_error(text):
    """The first line of a build's output that says what went wrong."""
    for ln in text.splitlines():
        if re.search(r"\b(error|Error|ERROR|failed|Failed|fatal|E:|cannot|not found)\b", ln) and \
                not ln.startswith("[docker/build"):
            return ln.strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no output)"


def podman_env(state):
    """The environment with the state folder's private podman configuration."""
    env = dict(os.environ, CONTAINER_STATE=state)
    if os.path.exists(os.path.join(state, "env.sh")):
        for ln in open(os.path.join(state, "env.sh")):
            m = re.match(r"export (\w+)=(.*)", ln.strip())
            if m:
                env[m.group(1)] = m.group(2)
    return env


def build_pdbsym(root, state, tag):
    """docker/build.sh TAG; the seconds it took. A sandbox where containers
    cannot run at all is a skip; a build that fails where they can is a
    failure (exit 1)."""
    t0 = time.monotonic()
    b = subprocess.run(["bash", os.path.join(root, "docker", "build.sh"), tag],
                       env=dict(os.environ, CONTAINER_STATE=state),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    print(b.stdout.rstrip())
    if b.returncode != 0:
        # the probe runs the local base image (never a pull from Docker Hub,
        # whose error would hide the real one)
        env = podman_env(state)
        base = "localhost/debian:bookworm-slim"
        have_base = shutil.which("podman") and subprocess.run(["podman", "image", "exists", base], env=env,
                                                              capture_output=True).returncode == 0
        probe = subprocess.run(["podman", "run", "--rm", "--pull=never", "--network=host", base, "true"],
                               env=env, capture_output=True, text=True) if have_base else None
        if probe is not None and probe.returncode != 0:
            unmount_all(state)
            skip("podman cannot run containers here (docker/build.sh exited %d; running %s: %s)" % (
                b.returncode, base, first_error(probe.stderr)))
        print("FAIL docker/build.sh exited %d; its first error: %s" % (b.returncode, first_error(b.stdout)))
        unmount_all(state)
        sys.exit(1)
    return took


class Podman:
    """podman with the state folder's configuration."""

    def __init__(self, state):
        self.env = podman_env(state)

    def __call__(self, *args, check=True, timeout=120):
        r = subprocess.run(["podman"] + list(args), env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("podman %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()[-1500:]))
        return r

