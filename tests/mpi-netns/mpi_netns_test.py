#!/usr/bin/env python3
"""CTest driver for tools/mpi-netns and tools/tp-projection (registered in CMakeLists.txt).

    mpi_netns_test.py --tools tools CASE

CASE dry-run: `mpi-netns --dry-run` (no root, nothing run) prints the namespaces, the veth
pair, each profile's qdisc, the mpirun over TCP on the veth subnet, and the teardown of both
namespaces; a bad profile is a one-line error with exit 2.
CASE projection: tp-projection on a small config and two records whose arithmetic is worked
out by hand below, against its --json output; a link without records is named.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

TOOLS = "tools"  # --tools


class DryRun(unittest.TestCase):
    def test_commands(self):
        r = subprocess.run([os.path.join(TOOLS, "mpi-netns"), "--dry-run", "--shaper", "netem", "--links", "none,1gbe",
                            "-r", "1", "--probe", "own"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        ns = re.findall(r"^\+ ip netns add (\S+)$", out, re.M)
        self.assertEqual(len(ns), 2, "two namespaces")
        for name in ns:
            self.assertIn(f"+ ip netns del {name}", out, "each namespace deleted at the end")
        self.assertRegex(out, re.compile(r"^\+ ip link add ni\d+a type veth peer name ni\d+b$", re.M))
        for end in "ab":
            self.assertRegex(out, re.compile(rf"tc qdisc replace dev ni\d+{end} root netem delay 50us rate 1gbit "
                                             r"limit 10000$", re.M))
        runs = [line for line in out.splitlines() if " mpirun " in line]
        self.assertEqual(len(runs), 2, "one mpirun per profile and round")
        for line in runs:
            self.assertIn(f"ip netns exec {ns[0]} mpirun --allow-run-as-root -np 2", line)
            self.assertIn("--mca pml ob1 --mca btl tcp,self", line)
            subnet = re.search(r"--mca btl_tcp_if_include (10\.231\.\d+\.0/24)", line)
            self.assertIsNotNone(subnet)
            self.assertIn(f"--mca oob_tcp_if_include {subnet.group(1)}", line)
            self.assertIn("--bind-to none", line)
            self.assertIn("--floats 896,8192,32768,262144", line)
        self.assertGreater(out.rindex("ip netns del"), out.rindex(" mpirun "), "teardown after the last mpirun")

    def test_bad_profile(self):
        r = subprocess.run([os.path.join(TOOLS, "mpi-netns"), "--dry-run", "--links", "none,5gbe"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip().splitlines()[-1],
                         "mpi-netns: error: --links: unknown profile '5gbe' (known: none, 10gbe, 1gbe)")


# One layer, d = 1000, one head of 1000, one KV head, intermediate 1000, V = 2000: layer params
# 2 * 1000 * 1000 (q, o) + 2 * 1000 * 1000 (k, v) + 3 * 1000 * 1000 = 7e6, head 2e6; at 8 bits
# W = 9e6 bytes; --context 0: no KV. At 9 GB/s a machine streams its W / N in 1 / N ms.
CONFIG = {"hidden_size": 1000, "intermediate_size": 1000, "num_hidden_layers": 1, "num_attention_heads": 1,
          "num_key_value_heads": 1, "vocab_size": 2000, "tie_word_embeddings": False}
# 1gbe (b = 8 ns/byte): 896 floats in 48.672 us = 28.672 us on the wire + 20 us; the record's
# shaper added none of the profile's 50 us delay, so a = 20 + 50 = 70 us. AR(2, 1000) = 100 us
# measured + 50 us (one recursive-doubling step) = 150 us. The older run is ignored.
RUN = {"bench": "mpi-netns", "kind": "allreduce", "link": "1gbe", "ranks": 2, "algorithm": "default",
       "timestamp": "2026-01-01T00:00:00Z", "delay_us": 50, "delay_applied_us": 0, "command": "x"}
RECORDS = [dict(RUN, floats=896, median_us=48.672), dict(RUN, floats=1000, median_us=100.0),
           dict(RUN, floats=1000, median_us=999.0, timestamp="2025-01-01T00:00:00Z")]
# net(N) = (2 L + 1) AR + G + 2 ceil(log2 N) a, G = a + (N - 1) / N * 4 V b:
#   N = 2: 3 * 150 + (70 + 0.5 * 8000 * 0.008) + 2 * 70 = 450 + 102 + 140 = 692 us; t = 500 + 692 us.
#   N = 4, allgather: AR = 2 * 70 + 3 * 4000 * 0.008 = 236; G = 70 + 48 = 118; broadcasts 280;
#          net = 708 + 118 + 280 = 1106 us; t = 250 + 1106 us.
#   N = 4, allreduce: AR = 4 * 70 + 2 * 0.75 * 32 = 328; net = 984 + 398 = 1382 us; t = 250 + 1382 us.
#   N = 4, alltoall: AR = (3 + 2) * 70 + 2 * 0.75 * 32 = 398; net = 1194 + 398 = 1592 us; t = 250 + 1592 us.
WANT = {("allgather", 1): 1 / 1000e-6, ("allgather", 2): 1 / 1192e-6, ("allgather", 4): 1 / 1356e-6,
        ("allreduce", 2): 1 / 1192e-6, ("allreduce", 4): 1 / 1632e-6, ("alltoall", 2): 1 / 1192e-6,
        ("alltoall", 4): 1 / 1842e-6}


class Projection(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tp-projection-test.")
        self.config, self.records = os.path.join(self.tmp.name, "config.json"), os.path.join(self.tmp.name, "r.jsonl")
        with open(self.config, "w") as f:
            json.dump(CONFIG, f)
        with open(self.records, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in RECORDS)

    def tearDown(self):
        self.tmp.cleanup()

    def test_worked_example(self):
        r = subprocess.run([os.path.join(TOOLS, "tp-projection"), "--config", self.config, "--records", self.records,
                            "--bits", "8", "--context", "0", "--bandwidth-gbps", "9", "--ranks", "1,2,4", "--links",
                            "1gbe", "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual((got["weight_bytes"], got["kv_bytes"]), (9e6, 0))
        self.assertAlmostEqual(got["links"]["1gbe"]["a_us"], 70, places=9)
        self.assertAlmostEqual(got["links"]["1gbe"]["ar2_us"], 150, places=9)
        rows = {(row["collective"], row["ranks"]): row["tokens_per_s"] for row in got["projected"]}
        for key, want in WANT.items():
            self.assertAlmostEqual(rows[key] / want, 1, places=9, msg=f"{key}: {rows[key]} tokens/s, want {want}")

    def test_link_without_records(self):
        r = subprocess.run([os.path.join(TOOLS, "tp-projection"), "--records", self.records, "--links", "10gbe"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no 2-rank all-reduce record of link 10gbe", r.stderr)


def main():
    global TOOLS
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("case", choices=["dry-run", "projection"])
    a = ap.parse_args()
    TOOLS = a.tools
    suite = unittest.defaultTestLoader.loadTestsFromTestCase({"dry-run": DryRun, "projection": Projection}[a.case])
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
