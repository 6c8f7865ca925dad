#!/usr/bin/env python3
"""CTest driver for tools/vs-llama-cpp (registered in CMakeLists.txt).

    vs_llama_cpp_test.py --script tools/vs-llama-cpp --nanoinfer build/release/nanoinfer CASE

CASE needs-llama-bench: without --llama-bench the script exits 2 with its one-line message.
CASE fake: five rounds against tests/vs-llama-cpp/fake-llama-bench (fixed speeds) on the
embedded default model exported to GGUF; checks the appended JSON line field by field and the
sign test's exact binomial p-values (5 of 5 -> 0.0625, 1 of 5 -> 0.375).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def needs_llama_bench(a):
    r = subprocess.run([a.script, "--model", "x.gguf"], capture_output=True, text=True)
    check(r.returncode == 2, f"exit code {r.returncode}, expected 2")
    check(r.stdout == "", f"stdout not empty: {r.stdout!r}")
    lines = r.stderr.splitlines()
    check(len(lines) == 1, f"expected one stderr line, got {lines!r}")
    check(r.stderr.startswith("vs-llama-cpp: --llama-bench PATH is required: build llama.cpp outside this tree"),
          f"message: {r.stderr!r}")
    check("llama-bench" in r.stderr and "cmake" in r.stderr, "the message says how to build it")


def fake(a):
    with tempfile.TemporaryDirectory(prefix="vs-llama-cpp-test.") as tmp:
        gguf = os.path.join(tmp, "default.gguf")
        r = subprocess.run([a.nanoinfer, "quantize", "--type", "f32", "--format", "gguf", "--out", gguf],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"export failed: {r.stderr}")
        out = os.path.join(tmp, "vs.jsonl")
        env = dict(os.environ, FAKE_STATE=os.path.join(tmp, "calls"), FAKE_PP_TS="0.001",
                   FAKE_TG_TS="0.001,1e12,1e12,1e12,1e12")
        cmd = [a.script, "--llama-bench", os.path.join(HERE, "fake-llama-bench"), "--nanoinfer", a.nanoinfer,
               "--model", gguf, "-p", "16", "-n", "8", "-t", "1", "-r", "5", "--out", out]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"exit code {r.returncode}: {r.stderr}")
        print(r.stdout)
        check("| pp16 |" in r.stdout and "| tg8 |" in r.stdout, "the table names both tests")
        check(r.stderr.count("\n") == 5, f"one progress line per round: {r.stderr!r}")
        with open(os.path.join(tmp, "calls")) as f:
            check(f.read().strip() == "5", "llama-bench ran once per round")
        with open(out) as f:
            lines = f.read().splitlines()
        check(len(lines) == 1, f"one JSON line appended, got {len(lines)}")
        j = json.loads(lines[0])
        for key in ("bench", "timestamp", "commit", "cpu", "threads", "file", "file_bytes", "n_prompt", "n_gen",
                    "rounds", "nanoinfer", "llama_cpp", "tests"):
            check(key in j, f"record has {key}")
        check(j["bench"] == "vs-llama-cpp", "bench name")
        check(j["threads"] == 1 and j["n_prompt"] == 16 and j["n_gen"] == 8 and j["rounds"] == 5, "run parameters")
        check(j["file"] == gguf and j["file_bytes"] == os.path.getsize(gguf), "file and size")
        check(j["llama_cpp"]["build_commit"] == "fake0000" and j["llama_cpp"]["cpu_info"] == "Fake CPU",
              "llama.cpp's build commit and CPU as it reported them")
        check(j["nanoinfer"]["dtype"] == "f32", f"nanoinfer ran the file's f32: {j['nanoinfer']}")
        check(isinstance(j["commit"], str) and j["commit"] != "", "nanoinfer commit")
        check([t["test"] for t in j["tests"]] == ["pp16", "tg8"], "tests in order")
        pp, tg = j["tests"]
        for t in (pp, tg):
            ours = t["nanoinfer"]["samples_ts"]
            check(len(ours) == 5 and all(x > 0 for x in ours), f"{t['test']}: five positive samples")
            check(t["nanoinfer"]["median_ts"] == sorted(ours)[2] and t["nanoinfer"]["min_ts"] == min(ours),
                  f"{t['test']}: median and minimum of ours")
            check(t["ratio"] == t["nanoinfer"]["median_ts"] / t["llama_cpp"]["median_ts"], f"{t['test']}: ratio")
        check(pp["llama_cpp"]["samples_ts"] == [0.001] * 5, "llama.cpp pp samples as printed")
        check(pp["llama_cpp"]["median_ts"] == 0.001 and pp["llama_cpp"]["min_ts"] == 0.001, "llama.cpp pp median/min")
        check((pp["wins"], pp["losses"], pp["ties"]) == (5, 0, 0), f"pp: 5 of 5 won, got {pp['wins']}")
        check(pp["p"] == 0.0625, f"pp: p = 2 / 2^5 = 0.0625 exactly, got {pp['p']}")
        check(tg["llama_cpp"]["median_ts"] == 1e12 and tg["llama_cpp"]["min_ts"] == 0.001, "llama.cpp tg median/min")
        check((tg["wins"], tg["losses"], tg["ties"]) == (1, 4, 0), f"tg: 1 of 5 won, got {tg['wins']}")
        check(tg["p"] == 0.375, f"tg: p = 2 (1 + 5) / 2^5 = 0.375 exactly, got {tg['p']}")

        # The record's directory must exist: refused before anything runs.
        r = subprocess.run(cmd[:-1] + [os.path.join(tmp, "nope", "vs.jsonl")], capture_output=True, text=True, env=env)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "nope: no such directory for the record" in r.stderr,
              f"missing --out directory: {r.returncode} {r.stderr!r}")
        with open(os.path.join(tmp, "calls")) as f:
            check(f.read().strip() == "5", "nothing ran for the refused --out")

        # --depth --fa 0,1: two llama-bench calls per round (ppP, then tgN at depth P), each
        # setting its own rows; the fake runs -fa 1 at twice the speed.
        os.remove(os.path.join(tmp, "calls"))
        env = dict(env, FAKE_PP_TS="100", FAKE_TG_TS="10")
        r = subprocess.run(cmd[:-4] + ["-r", "3", "--depth", "--fa", "0,1", "--out", out], capture_output=True,
                           text=True, env=env)
        check(r.returncode == 0, f"--depth --fa 0,1: exit code {r.returncode}: {r.stderr}")
        with open(os.path.join(tmp, "calls")) as f:
            check(f.read().strip() == "6", "--depth: llama-bench ran twice per round")
        with open(out) as f:
            j = json.loads(f.read().splitlines()[-1])
        check([t["test"] for t in j["tests"]] == ["pp16 fa0", "tg8 fa0", "pp16 fa1", "tg8 fa1"],
              f"one row per test and setting: {[t['test'] for t in j['tests']]}")
        theirs = {t["test"]: t["llama_cpp"]["median_ts"] for t in j["tests"]}
        check(theirs == {"pp16 fa0": 100, "tg8 fa0": 10, "pp16 fa1": 200, "tg8 fa1": 20},
              f"each setting's own numbers: {theirs}")
        check(j["llama_tg_depth"] == 16 and j["llama_fa"] == [0, 1], "depth and settings recorded")
        r = subprocess.run(cmd[:-2] + ["--fa", "2", "--out", out], capture_output=True, text=True, env=env)
        check(r.returncode == 2 and "--fa must be 0, 1 or 0,1" in r.stderr, f"--fa 2 refused: {r.stderr!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--nanoinfer", required=True)
    ap.add_argument("case", choices=["needs-llama-bench", "fake"])
    a = ap.parse_args()
    needs_llama_bench(a) if a.case == "needs-llama-bench" else fake(a)
    print("FAILED" if failures else "OK", f"({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
