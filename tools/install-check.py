#!/usr/bin/env python3
"""install-check: shows that `go install github.com/redlock-go/redlock/cmd/redlock@VERSION`
works once the modules it needs are released, without publishing anything.

It packs the root module, redlocktest, redlockotel (the CLI's --metrics-addr uses it)
and cmd/redlock from the working tree (the files
git tracks) into a module proxy on the local disk, at one made-up version, with their
requirements on each other set to that version (the release steps of docs/design.md,
"Modules"), then runs `go install ...@VERSION` against that proxy, outside any
workspace, with every other module from the usual proxy, and runs the binary.

    python3 tools/install-check.py [VERSION]     # default v0.99.0; prints the binary's first help line
"""
import json, os, re, shutil, subprocess, sys, tempfile, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = "github.com/redlock-go/redlock"
MODULES = {"": BASE, "redlocktest": BASE + "/redlocktest", "redlockotel": BASE + "/redlockotel",
           "cmd/redlock": BASE + "/cmd/redlock"}
PLACEHOLDER = "v0.0.0-00010101000000-000000000000"


def tracked(subdir):
    """The files git tracks in the module at subdir, without nested modules'."""
    out = subprocess.run(["git", "ls-files", "-z", "--", subdir or "."], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode().split("\0")
    files = [f for f in out if f]
    nested = {os.path.dirname(f) for f in files if f.endswith("/go.mod") or f == "go.mod"}
    nested.discard(subdir)
    keep = []
    for f in files:
        if any(f == n or f.startswith(n + "/") for n in nested if n != "" and n != subdir):
            continue
        keep.append(f)
    return keep


def pack(proxy, subdir, path, version, gosum_extra=""):
    rel = lambda f: f[len(subdir) + 1:] if subdir else f
    gomod = open(os.path.join(ROOT, subdir, "go.mod")).read().replace(PLACEHOLDER, version)
    d = os.path.join(proxy, path, "@v")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, version + ".mod"), "w") as f:
        f.write(gomod)
    with open(os.path.join(d, version + ".info"), "w") as f:
        json.dump({"Version": version, "Time": "2026-12-01T00:00:00Z"}, f)
    with open(os.path.join(d, "list"), "w") as f:
        f.write(version + "\n")
    with zipfile.ZipFile(os.path.join(d, version + ".zip"), "w", zipfile.ZIP_DEFLATED) as z:
        for f in tracked(subdir):
            name = rel(f)
            if name == "go.mod":
                z.writestr(f"{path}@{version}/go.mod", gomod)
            elif name == "go.sum":
                z.writestr(f"{path}@{version}/go.sum", open(os.path.join(ROOT, f)).read() + gosum_extra)
            else:
                z.write(os.path.join(ROOT, f), f"{path}@{version}/{name}")


def sums(proxy, env, version, paths):
    """go.sum lines for the packed modules, as a release's go mod tidy would write them."""
    lines = []
    for p in paths:
        res = subprocess.run(["go", "mod", "download", "-json", f"{p}@{version}"], env=env,
                             capture_output=True, text=True, cwd=proxy)
        if res.returncode != 0:
            sys.exit(f"go mod download {p}@{version}: {res.stdout}{res.stderr}")
        out = res.stdout
        info = json.loads(out)
        lines.append(f"{p} {version} {info['Sum']}\n{p} {version}/go.mod {info['GoModSum']}\n")
    return "".join(lines)


def main():
    version = sys.argv[1] if len(sys.argv) > 1 else "v0.99.0"
    work = tempfile.mkdtemp(prefix="redlock-install-check-")
    try:
        proxy = os.path.join(work, "proxy")
        cache = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True,
                               text=True).stdout.strip()
        # The packed modules first, then what this machine has already downloaded
        # (a module cache is a proxy on disk), then the public proxy.
        env = dict(os.environ, GOWORK="off", GOFLAGS="", GOPRIVATE="", GONOPROXY="", GONOSUMDB=BASE,
                   GOPROXY=",".join(["file://" + proxy, "file://" + cache + "/cache/download",
                                     "https://proxy.golang.org"]),
                   GOMODCACHE=os.path.join(work, "modcache"), GOBIN=os.path.join(work, "bin"))
        pack(proxy, "", BASE, version)
        pack(proxy, "redlocktest", MODULES["redlocktest"], version, sums(proxy, env, version, [BASE]))
        pack(proxy, "redlockotel", MODULES["redlockotel"], version, sums(proxy, env, version, [BASE]))
        pack(proxy, "cmd/redlock", MODULES["cmd/redlock"], version,
             sums(proxy, env, version, [BASE, MODULES["redlocktest"], MODULES["redlockotel"]]))
        if subprocess.run(["go", "install", f"{MODULES['cmd/redlock']}@{version}"], env=env, cwd=work).returncode:
            sys.exit(f"install-check: go install {MODULES['cmd/redlock']}@{version} failed (above)")
        out = subprocess.run([os.path.join(work, "bin", "redlock"), "--help"], capture_output=True, text=True)
        first = (out.stdout + out.stderr).strip().splitlines()[0]
        print(f"go install {MODULES['cmd/redlock']}@{version}: ok; the binary says: {first}")
    finally:
        subprocess.run(["chmod", "-R", "u+w", work])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
