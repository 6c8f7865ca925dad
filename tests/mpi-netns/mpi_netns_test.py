#!/usr/bin/env python3
"""CTest driver for tools/mpi-netns and tools/tp-projection (registered in CMakeLists.txt).

    mpi_netns_test.py --tools tools CASE

CASE dry-run: `mpi-netns --dry-run` (no root, nothing run) prints the namespaces, the veth
pair, each profile's qdisc, the mpirun over TCP on the veth subnet, and the teardown of both
namespaces; a bad profile is a one-line error with exit 2.
CASE projection: tp-projection on a small config and two records whose arithmetic is worked
out by hand below, against its --json output.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def dry_run(tools):
    script = os.path.join(tools, "mpi-netns")
    r = subprocess.run([script, "--dry-run", "--shaper", "netem", "--links", "none,1gbe", "-r", "1", "--probe", "own"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"dry run exit code {r.returncode}: {r.stderr}")
    out = r.stdout
    ns = re.findall(r"^\+ ip netns add (\S+)$", out, re.M)
    check(len(ns) == 2, f"two namespaces added: {ns}")
    for name in ns:
        check(f"+ ip netns del {name}" in out, f"namespace {name} deleted at the end")
    check(re.search(r"^\+ ip link add ni\d+a type veth peer name ni\d+b$", out, re.M) is not None, "a veth pair")
    check(re.search(r"tc qdisc replace dev ni\d+a root netem delay 50us rate 1gbit limit 10000$", out, re.M)
          is not None, "1gbe: netem delay 50us rate 1gbit on one end")
    check(re.search(r"tc qdisc replace dev ni\d+b root netem delay 50us rate 1gbit limit 10000$", out, re.M)
          is not None, "... and on the other")
    runs = [l for l in out.splitlines() if " mpirun " in l]
    check(len(runs) == 2, f"one mpirun per profile and round: {len(runs)}")
    for l in runs:
        check(f"ip netns exec {ns[0]} mpirun --allow-run-as-root -np 2" in l, "mpirun runs in the first namespace")
        check("--mca pml ob1 --mca btl tcp,self" in l, "MPI over TCP only")
        subnet = re.search(r"--mca btl_tcp_if_include (10\.231\.\d+\.0/24)", l)
        check(subnet is not None and f"--mca oob_tcp_if_include {subnet.group(1)}" in l, "btl and oob on the subnet")
        check("--bind-to none" in l and "--floats 896,8192,32768,262144" in l, "unbound ranks, the default sizes")
    check(out.rindex("ip netns del") > out.rindex(" mpirun "), "teardown after the last mpirun")

    r = subprocess.run([script, "--dry-run", "--links", "none,5gbe"], capture_output=True, text=True)
    check(r.returncode == 2, f"bad profile: exit code {r.returncode}")
    check(r.stderr.strip().splitlines()[-1] == "mpi-netns: error: --links: unknown profile '5gbe' "
          "(known: none, 10gbe, 1gbe)", f"bad profile message: {r.stderr!r}")


def projection(tools):
    # One layer, d = 1000, one head of 1000, one KV head, intermediate 1000, V = 2000:
    # layer params 2 * 1000 * 1000 (q, o) + 2 * 1000 * 1000 (k, v) + 3 * 1000 * 1000 = 7e6,
    # head 2e6; at 8 bits W = 9e6 bytes; --context 0: no KV. At 9 GB/s a machine streams its
    # W / N in 1 / N ms.
    config = {"hidden_size": 1000, "intermediate_size": 1000, "num_hidden_layers": 1, "num_attention_heads": 1,
              "num_key_value_heads": 1, "vocab_size": 2000, "tie_word_embeddings": False}
    # 1gbe (b = 8 ns/byte): 896 floats in 48.672 us = 28.672 us on the wire + 20 us; the record's
    # shaper added no delay of the profile's 50 us, so a = 20 + 50 = 70 us. AR(2, 1000) =
    # 100 us measured + 50 us (one recursive-doubling step) = 150 us.
    base = {"bench": "mpi-netns", "kind": "allreduce", "link": "1gbe", "ranks": 2, "algorithm": "default",
            "timestamp": "2026-01-01T00:00:00Z", "delay_us": 50, "delay_applied_us": 0, "command": "x"}
    records = [dict(base, floats=896, median_us=48.672), dict(base, floats=1000, median_us=100.0),
               dict(base, floats=1000, median_us=999.0, timestamp="2025-01-01T00:00:00Z")]  # older: ignored
    # net(N) = (2 L + 1) AR + G + 2 ceil(log2 N) a, G = a + (N - 1) / N * 4 V b:
    #   N = 2: 3 * 150 + (70 + 0.5 * 8000 * 0.008) + 2 * 70 = 450 + 102 + 140 = 692 us; t = 500 + 692 us.
    #   N = 4, allgather: AR = 2 * 70 + 3 * 4000 * 0.008 = 236; G = 70 + 48 = 118; broadcasts 280;
    #          net = 708 + 118 + 280 = 1106 us; t = 250 + 1106 us.
    #   N = 4, allreduce: AR = 4 * 70 + 2 * 0.75 * 32 = 328; net = 984 + 398 = 1382 us; t = 250 + 1382 us.
    want = {("allgather", 1): 1 / 1000e-6, ("allgather", 2): 1 / 1192e-6, ("allgather", 4): 1 / 1356e-6,
            ("allreduce", 2): 1 / 1192e-6, ("allreduce", 4): 1 / 1632e-6}
    with tempfile.TemporaryDirectory(prefix="tp-projection-test.") as tmp:
        cfg_path, rec_path = os.path.join(tmp, "config.json"), os.path.join(tmp, "records.jsonl")
        with open(cfg_path, "w") as f:
            json.dump(config, f)
        with open(rec_path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        r = subprocess.run([os.path.join(tools, "tp-projection"), "--config", cfg_path, "--records", rec_path, "--bits",
                            "8", "--context", "0", "--bandwidth-gbps", "9", "--ranks", "1,2,4", "--links", "1gbe",
                            "--json"], capture_output=True, text=True)
        check(r.returncode == 0, f"tp-projection exit code {r.returncode}: {r.stderr}")
        got = json.loads(r.stdout)
        check(got["weight_bytes"] == 9e6 and got["kv_bytes"] == 0,
              f"W and KV: {got['weight_bytes']}, {got['kv_bytes']}")
        link = got["links"]["1gbe"]
        check(abs(link["a_us"] - 70) < 1e-9 and abs(link["ar2_us"] - 150) < 1e-9, f"a and AR(2, d): {link}")
        for row in got["projected"]:
            key = (row["collective"], row["ranks"])
            if key in want:
                check(abs(row["tokens_per_s"] / want[key] - 1) < 1e-9,
                      f"{key}: {row['tokens_per_s']} tokens/s, want {want[key]}")
        r = subprocess.run([os.path.join(tools, "tp-projection"), "--records", rec_path, "--links", "10gbe"],
                           capture_output=True, text=True)
        check(r.returncode != 0 and "no 2-rank all-reduce record of link 10gbe" in r.stderr,
              f"a link without records is named: {r.stderr!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("case", choices=["dry-run", "projection"])
    a = ap.parse_args()
    {"dry-run": dry_run, "projection": projection}[a.case](a.tools)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
