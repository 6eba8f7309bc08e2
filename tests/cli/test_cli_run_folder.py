"""attnscope-cli on a run folder (one dump per rank, as attnscope_record writes under
torch.distributed): info's rank x step x layer overview, scan's first bad (step, layer, head,
rank) and whether the other ranks share the fault, and scan --shard I/N (split by dumps or by
cases) joined by merge into exactly the bytes of the unsharded scan."""
import json
import os

from cli_support import DATA, SAMPLE, CliTestCase, run_cli
from run_folder import write_run


def make_run(name, nan_by_rank, world=2, steps=None):
    """A fresh run folder under the test data folder (tests/data/run_folder.py)."""
    return write_run(os.path.join(DATA, name), nan_by_rank, world, steps)


def write_shards(source, count, prefix="shard"):
    """Runs scan --json --shard I/count for every I; the report paths, in index order."""
    paths = []
    for index in range(count):
        shard = run_cli("scan", "--json", source, "--shard", f"{index}/{count}")
        if shard.returncode not in (0, 1):
            raise AssertionError(f"shard {index}/{count} of {source}: {shard.stderr}")
        path = os.path.join(DATA, f"{prefix}_{index}.json")
        with open(path, "w") as f:
            f.write(shard.stdout)
        paths.append(path)
    return paths


class CliRunFolderTest(CliTestCase):
    def test_cli_info_run_folder_lists_ranks_and_step_layer_overview(self):
        run = make_run("info_run", {1: [(1, 1)]})
        doc = self.cli_json("info", "--json", run, exit=0)
        self.assertEqual([(f["path"], f["rank"], f["world_size"], f["host"], f["cases"])
                          for f in doc["files"]],
                         [("rank_00000.h5", 0, 2, "node7", 6), ("rank_00001.h5", 1, 2, "node7", 6)])
        self.assertEqual(doc["world_size"], 2)
        self.assertEqual([(o["step"], o["layer"], o["ranks"]) for o in doc["overview"]],
                         [(s, l, [0, 1]) for s in range(3) for l in range(2)])
        table = self.cli("info", run, exit=0)
        self.assertInStdout(table, "run folder, 2 dumps, ranks 0,1 of 2, 12 cases",
                            "ranks that recorded each step and layer")

    def test_cli_scan_run_folder_names_first_bad_rank_on_one_rank(self):
        run = make_run("one_rank_run", {1: [(1, 1), (2, 0)], 0: [(2, 1)]})
        doc = self.cli_json("scan", "--json", run, exit=1)
        self.assertEqual([(c["file"], c["rank"], c["path"]) for c in doc["cases"][:2]],
                         [("rank_00000.h5", 0, "/step_000000/layer_00"),
                          ("rank_00000.h5", 0, "/step_000000/layer_01")])
        self.assertEqual(doc["cases"][6]["rank"], 1)
        first = doc["first_bad"]
        self.assertEqual((first["step"], first["layer"], first["head"], first["rank"]), (1, 1, 1, 1))
        self.assertEqual(first["path"], "rank_00001.h5::/step_000001/layer_01")
        self.assertEqual((first["scope"], first["ranks"]), ("one_rank", [1]))
        self.assertEqual(first["later_steps"], [2])
        self.assertIn("rank 1 only (of 2 ranks): its inputs were already non-finite",
                      first["text"])
        table = self.cli("scan", run, exit=1)
        self.assertInStdout(table, "first bad case: step 1, layer 1, head 1, rank 1",
                            "12 cases in 2 dumps of a run")

    def test_cli_scan_run_folder_fault_on_every_rank_is_shared(self):
        run = make_run("all_ranks_run", {0: [(1, 1)], 1: [(1, 0)]})
        first = self.cli_json("scan", "--json", run, exit=1)["first_bad"]
        # Layer 0 of step 1 (rank 1) comes before layer 1 of step 1 (rank 0).
        self.assertEqual((first["step"], first["layer"], first["rank"]), (1, 0, 1))
        self.assertEqual((first["scope"], first["ranks"]), ("all_ranks", [0, 1]))
        self.assertIn("on all 2 ranks: something they share", first["text"])

    def test_cli_scan_run_folder_skips_an_unreadable_dump_and_scans_the_rest(self):
        run = make_run("broken_run", {1: [(0, 0)]}, world=3)
        with open(os.path.join(run, "rank_00002.h5"), "wb") as f:
            f.write(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
        doc = self.cli_json("scan", "--json", run, exit=2)
        self.assertEqual(len(doc["cases"]), 12)
        self.assertEqual([b["path"] for b in doc["broken"]], ["rank_00002.h5"])
        self.assertEqual(doc["first_bad"]["rank"], 1)

    def test_cli_merge_of_shards_is_byte_identical_to_unsharded_scan(self):
        # The run folder's 2 dumps in 1 and 2 shards split by dumps, in 5 and 20 (some empty)
        # by cases; the sample (one file) in 3 by cases.
        run = make_run("shard_run", {1: [(1, 1)]})
        for source, counts in ((run, (1, 2, 5, 20)), (SAMPLE, (3,))):
            whole = run_cli("scan", "--json", source)
            for count in counts:
                merged = run_cli("merge", *reversed(write_shards(source, count)))
                self.assertEqual(merged.returncode, whole.returncode, merged.stderr)
                self.assertEqual(merged.stdout, whole.stdout, f"{source} in {count} shards")

    def test_cli_scan_shards_of_a_run_folder_open_only_their_dumps(self):
        # Rank 0 holds 8 of 10 steps: shard 0 of 3 gets no dump, shard 1 rank 0, shard 2 the
        # two small ones (each dump goes where the middle of its bytes falls).
        run = make_run("uneven_run", {2: [(0, 1)]}, world=3, steps={0: 8, 1: 1, 2: 1})
        paths = write_shards(run, 3, prefix="uneven")
        docs = [json.load(open(p)) for p in paths]
        self.assertEqual([d["shard"]["split"] for d in docs], ["dumps"] * 3)
        self.assertEqual([[f["path"] for f in d["files"]] for d in docs],
                         [[], ["rank_00000.h5"], ["rank_00001.h5", "rank_00002.h5"]])
        self.assertEqual([d["cases_total"] for d in docs], [0, 16, 4])
        whole = run_cli("scan", "--json", run)
        merged = run_cli("merge", *paths)
        self.assertEqual((merged.returncode, merged.stdout), (whole.returncode, whole.stdout))
        self.assertEqual(json.loads(merged.stdout)["first_bad"]["rank"], 2)

    def test_cli_merge_refuses_missing_mixed_or_foreign_reports(self):
        run = make_run("refuse_run", {})
        shards = write_shards(run, 3, prefix="refuse")
        missing = self.cli("merge", shards[0], shards[2], exit=2)
        self.assertIn("shards 1 of 3 are missing", missing.stderr)
        twice = self.cli("merge", shards[0], shards[0], shards[1], exit=2)
        self.assertIn("given twice", twice.stderr)
        other = os.path.join(DATA, "refuse_other.json")
        with open(other, "w") as f:
            f.write(run_cli("scan", "--json", SAMPLE, "--shard", "1/3").stdout)
        mixed = self.cli("merge", shards[0], other, shards[2], exit=2)
        self.assertIn("is a shard of another scan", mixed.stderr)
        plain = os.path.join(DATA, "refuse_plain.json")
        with open(plain, "w") as f:
            f.write(run_cli("scan", "--json", run).stdout)
        foreign = self.cli("merge", plain, exit=2)
        self.assertIn("not a shard report", foreign.stderr)

    def test_cli_scan_shard_option_is_checked(self):
        for bad in ("3/3", "1/0", "a/b", "-1/2", "1/2x"):
            run = self.cli("scan", SAMPLE, "--shard", bad, exit=2)
            self.assertIn(f"bad --shard '{bad}'", run.stderr)
        follow = self.cli("scan", SAMPLE, "--shard", "0/2", "--follow", exit=2)
        self.assertIn("--follow takes one FILE", follow.stderr)

    def test_cli_scan_folder_without_dumps_says_so(self):
        empty = os.path.join(DATA, "empty_run")
        os.makedirs(empty, exist_ok=True)
        run = self.cli("scan", empty, exit=2)
        self.assertIn("no dump in this folder", run.stderr)
