"""W&B logging, offline: the run files hold the generations, the lineage table, the config and the
best checkpoint; selection's survivors are counted right; a missing login is one clear line."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from evohpo import config as C
from evohpo.cli import main
from evohpo.logs.scalars import chartable
from evohpo.logs.wandb import WandbError, WandbLogger
from tests.test_trainer import TINY, read_jsonl

ARGS = ["--algo", "matd3", "--env", "simple_speaker_listener", "--quiet", "--steps", "96",
        "--set", "env.pool=sync", "--set", "env.num_envs=4", "--set", "population.size=4",
        "--set", "evolution.evo_steps=4", "--set", "evolution.learning_delay=0",
        "--set", "algo.batch_size=8", "--set", "algo.learn_step=4", "--set", "algo.hidden=[16]",
        "--set", "eval.episodes=1", "--set", "buffer.capacity=1000",
        "--set", "env.kwargs.max_cycles=8",
        "--set", "mutation.none=0.2", "--set", "mutation.hyperparameters=1",
        "--set", "mutation.architecture=0.5"]


@pytest.fixture(autouse=True)
def wandb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything W&B writes goes under the test's tmp dir; no login, no network."""
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home" / var.lower()))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def read_wandb(run_dir: Path) -> dict[str, Any]:
    """The records of the offline run in ``run_dir/wandb``: the .wandb file is a LevelDB-style log
    (7-byte header ':W&B' 0xBEE1 0; 32 KiB blocks of records with a 7-byte header: crc32, length,
    type FULL=1 FIRST=2 MIDDLE=3 LAST=4) of protobuf ``Record`` messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:7] == struct.pack("<4sHB", b":W&B", 0xBEE1, 0)
    block, i, chunks, buf = 32768, 7, [], b""
    while i + 7 <= len(data):
        if block - i % block < 7:  # the rest of a block too small for a header is padding
            i += block - i % block
            continue
        _, n, kind = struct.unpack("<IHB", data[i:i + 7])
        if kind == 0:
            break
        chunk, i = data[i + 7:i + 7 + n], i + 7 + n
        if kind == 1:
            chunks.append(chunk)
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            chunks.append(buf + chunk)
    out: dict[str, Any] = {"history": [], "artifacts": [], "metrics": [], "dir": path.parent}
    for c in chunks:
        rec = pb.Record()
        rec.ParseFromString(c)
        which = rec.WhichOneof("record_type")
        if which == "run":
            out["run"] = rec.run
            out["config"] = {u.key: json.loads(u.value_json) for u in rec.run.config.update}
        elif which == "history":
            out["history"].append({it.key or "/".join(it.nested_key): json.loads(it.value_json)
                                   for it in rec.history.item})
        elif which == "artifact":
            out["artifacts"].append(rec.artifact)
        elif which == "metric":
            out["metrics"].append(rec.metric)
    return out


def test_offline_run_holds_generations_lineage_config_and_best(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, "--run-dir", str(run), "--wandb", "offline",
                 "--set", "logging.wandb.group=g1", "--set", "logging.wandb.tags=[a,b]"]) == 0
    metrics, lineage = read_jsonl(run / "metrics.jsonl"), read_jsonl(run / "lineage.jsonl")
    w = read_wandb(run)
    # W&B's service process may still be writing the file when finish() has returned on a busy
    # machine: wait (bounded) for the last generation's row before reading everything
    deadline = time.monotonic() + 60
    while sum("generation" in h for h in w["history"]) < len(metrics) and (
            time.monotonic() < deadline):
        time.sleep(0.5)
        w = read_wandb(run)
    # the run: named after its directory, grouped and tagged, the resolved config as its config
    assert (w["run"].display_name, w["run"].project, w["run"].run_group) == ("run", "evohpo", "g1")
    assert list(w["run"].tags) == ["a", "b"]
    cfg = C.to_dict(C.load([C.read_yaml(run / "config.yaml")]))
    assert {k: w["config"][k] for k in cfg} == cfg
    assert cfg["logging"]["wandb"]["mode"] == "offline"
    # env steps are every chart's x-axis
    assert any(m.glob_name == "*" and m.step_metric == "env_steps" for m in w["metrics"])
    # one history row per generation, with the same values as metrics.jsonl
    gens = [h for h in w["history"] if "generation" in h]
    assert len(gens) == len(metrics) >= 6
    for h, m in zip(gens, metrics, strict=True):
        assert h["env_steps"] == m["env_steps"]
        for k, v in chartable(m).items():
            if k != "env_steps":
                assert h[k] == pytest.approx(v), k
        ids = {k.split("/")[1] for k in m if k.startswith("member/")}
        for i in ids:  # keyed by member id: fitness, hyperparameters, size, losses
            for key in ("fitness", "lr_actor", "lr_critic", "batch_size", "learn_step", "tau",
                        "expl_noise", "params"):
                assert f"member/{i}/{key}" in h
            assert any(k.startswith(f"member/{i}/hidden/") and k.endswith("/units") for k in h)
        best = str(m["eval/best_member"])
        assert h["best/lr_actor"] == m[f"member/{best}/lr_actor"]
    assert any("member/" in k and k.endswith("critic_loss") for h in gens for k in h)
    # mutation counts and how many survived selection, from the lineage
    by_gen: dict[int, list[dict]] = {}
    for r in lineage:
        by_gen.setdefault(r["generation"], []).append(r)
    for h, m in zip(gens, metrics, strict=True):
        recs = by_gen.get(m["generation"], [])
        for kind in {r["kind"] for r in recs}:
            assert h[f"evo/{kind}"] == sum(r["kind"] == kind for r in recs)
        if recs:
            chosen = {r["member_id"] if r["kind"] == "elite" else r["parent_id"] for r in recs
                      if r["kind"] != "birth"}
            assert h["evo/survived"] == len(chosen)
            assert sum(v for k, v in h.items() if k.startswith("evo/survived/")) == len(chosen)
        else:
            assert "evo/survived" not in h
    # the lineage and the members as tables
    tables = {k.split("/")[0]: h for h in w["history"] for k in h if k.endswith("/_type")}
    assert tables["lineage"]["lineage/nrows"] == len(lineage)
    assert tables["members"]["members/nrows"] == sum(
        len({k.split("/")[1] for k in m if k.startswith("member/")}) for m in metrics)
    # a member's row: the population's env steps (the charts' x-axis) beside the member's own
    members = json.loads((w["dir"] / "files" / tables["members"]["members/path"]).read_text())
    col = {c: i for i, c in enumerate(members["columns"])}
    got = [(row[col["generation"]], row[col["member"]], row[col["env_steps"]],
            row[col["member_env_steps"]]) for row in members["data"]]
    assert got == [(m["generation"], i, m["env_steps"], m[f"member/{i}/env_steps"])
                   for m in metrics for i in member_ids(m)]
    assert any(pop != own for _, _, pop, own in got)  # two counts, not one under two names
    want = [(r["generation"], r["member_id"], r["kind"]) for r in lineage]
    table = json.loads((w["dir"] / "files" / tables["lineage"]["lineage/path"]).read_text())
    assert [(row[0], row[1], row[3]) for row in table["data"]] == want
    # ... and live: the incremental table grew every generation; its parts hold every record, in
    # order
    parts = [h["lineage_live/path"] for h in w["history"] if "lineage_live/path" in h]
    assert len(parts) >= len(metrics) - 1
    rows = [row for part in parts
            for row in json.loads((w["dir"] / "files" / part).read_text())["data"]]
    assert [(row[0], row[1], row[3]) for row in rows] == want
    # logged with the generation that completed them
    live = [h for h in gens if "lineage_live/nrows" in h]
    assert live[0]["lineage_live/nrows"] == len(by_gen_records(lineage, 0))
    # the best member's checkpoint as a model artifact
    (art,) = [a for a in w["artifacts"] if a.type == "model"]
    assert art.name.startswith("best-") and "best" in art.aliases
    assert [e.path for e in art.manifest.contents] == ["best.pt"]
    # the kept member's fitness on fresh episodes, not the highest screening estimate
    assert json.loads(art.metadata)["fitness"] == pytest.approx(metrics[-1]["eval/best_ever"])
    # W&B wrote only inside the run directory and the test's own tmp dirs
    assert (run / "wandb" / "evohpo-run-id").read_text() == w["run"].run_id


def test_resume_continues_the_same_wandb_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [a for a in ARGS if a not in ("--steps", "96")]
    assert main(["train", *args, "--steps", "48", "--run-dir", str(run), "--wandb", "offline"]) == 0
    first = (run / "wandb" / "evohpo-run-id").read_text()
    assert main(["train", "--resume", str(run), "--steps", "96", "--quiet"]) == 0
    assert (run / "wandb" / "evohpo-run-id").read_text() == first
    assert len(list(run.glob("wandb/offline-run-*"))) == 2


def member_ids(m: dict[str, Any]) -> list[str]:
    """The ids of a metrics row's members, in the order logged."""
    return list(dict.fromkeys(k.split("/")[1] for k in m if k.startswith("member/")))


def by_gen_records(lineage: list[dict], g: int) -> list[dict]:
    return [r for r in lineage if r["generation"] == g]


class FakeRun:
    id = "fake"

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def finish(self, exit_code: int = 0) -> None:
        self.exit_code = exit_code


def test_survivors_per_kind_known_answer(tmp_path: Path) -> None:
    fake = FakeRun()
    lg = WandbLogger(C.load([TINY]), tmp_path, run=fake)

    def gen(g: int, ids: list[int]) -> dict[str, Any]:
        return {"generation": g, "eval/best_member": ids[0],
                **{f"member/{i}/fitness": float(i) for i in ids},
                **{f"member/{i}/hidden/a/actor": "64-32" for i in ids}}

    def rec(g: int, mid: int, parent: int | None, kind: str) -> dict[str, Any]:
        return {"generation": g, "member_id": mid, "parent_id": parent, "kind": kind}

    lg.log(gen(0, [0, 1, 2, 3]), 100)
    lg.lineage([rec(0, 2, None, "elite"), rec(0, 4, 2, "hyperparameters"), rec(0, 5, 0, "weights"),
                rec(0, 6, 2, "none")])
    lg.log(gen(1, [2, 4, 5, 6]), 200)
    lg.lineage([rec(1, 4, 2, "elite"), rec(1, 7, 4, "architecture"), rec(1, 8, 6, "crossover"),
                rec(1, 9, 4, "none")])
    lg.log(gen(2, [4, 7, 8, 9]), 300)
    lg.lineage([])
    r0, r1, r2 = fake.rows
    assert (r0["evo/survived"], r0["evo/survived/initial"]) == (2, 2)  # 0 and 2 were chosen
    assert r1["evo/survived"] == 2  # 4 (hyperparameters) and 6 (none)
    assert {k: v for k, v in r1.items() if k.startswith("evo/survived")} == {
        "evo/survived": 2, "evo/survived/elite": 0, "evo/survived/hyperparameters": 1,
        "evo/survived/weights": 0, "evo/survived/none": 1}
    assert r1["evo/crossover"] == 1  # a kind the trainer does not know is still counted
    assert "evo/survived" not in r2
    # the live lineage table arrives with the generation that shows what followed each record
    assert "lineage_live" not in r0 and "lineage_live" in r1 and len(r2["lineage_live"].data) == 8
    assert r0["member/1/hidden/a/actor/units"] == 96 and r0["member/1/hidden/a/actor/layers"] == 2
    assert r2["best/fitness"] == 4.0 and r2["env_steps"] == 300
    lg.close()  # the lineage (with what followed each record) and the members as tables
    assert fake.exit_code == 0
    lineage, members = fake.rows[-2]["lineage"], fake.rows[-1]["members"]
    assert [row[3] for row in lineage.data] == ["elite", "hyperparameters", "weights", "none",
                                                "elite", "architecture", "crossover", "none"]
    # member 4: parent 2 at 2.0 -> 4.0, kept next
    assert lineage.data[1][8:12] == [2.0, 4.0, 2.0, True]
    assert len(members.data) == 12
    assert lg.made_by == {"0": "initial", "1": "initial", "2": "elite", "3": "initial",
                          "4": "elite", "5": "weights", "6": "none", "7": "architecture",
                          "8": "crossover", "9": "none"}


def test_online_without_login_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_MODE", raising=False)  # a bare --wandb is online
    cfg = C.load([TINY, {"logging": {"wandb": {"mode": "online"}}}])
    with pytest.raises(WandbError, match=r"wandb login.*--wandb offline"):
        WandbLogger(cfg, tmp_path)
    assert main(["train", *ARGS, "--run-dir", str(tmp_path / "r"), "--wandb"]) == 2  # as bad input
    err = capsys.readouterr().err
    assert err.startswith("evohpo: error: W&B (online) could not start: ") and len(
        err.strip().splitlines()) == 1, err
    assert "--wandb offline" in err and ".." not in err, err  # each sentence ends once
    assert err.count("wandb login") == 1 and err.lower().count("log in") == 1, err  # said once
    # nothing started: the same command can simply be run again
    assert not (tmp_path / "r").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    assert main(["train", *ARGS, "--run-dir", str(tmp_path / "kept"), "--overwrite",
                 "--wandb"]) == 2
    # only the run's files go
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]


def test_a_resume_whose_wandb_cannot_start_changes_no_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished run resumed with a larger budget and --wandb, without a login: one line, and
    it trained nothing, so every record is as it was (its last metrics line, which a resume
    that goes on replaces, included; config.yaml keeps its budget); the same resume without
    W&B then goes on as any resume."""
    from tests.test_user_errors import files_of

    monkeypatch.delenv("WANDB_MODE", raising=False)  # a bare --wandb is online
    run = tmp_path / "run"
    args = [a for a in ARGS if a not in ("--steps", "96")]
    assert main(["train", *args, "--steps", "48", "--run-dir", str(run),
                 "--set", "logging.tensorboard=true"]) == 0
    before = files_of(run, leave_out=("wandb",))
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "96", "--wandb"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "W&B (online) could not start" in err, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert files_of(run, leave_out=("wandb",)) == before
    assert main(["train", "--resume", str(run), "--steps", "96", "--quiet"]) == 0
    assert read_jsonl(run / "metrics.jsonl")[-1]["env_steps"] == 96


def test_quiet_keeps_wandb_quiet(tmp_path: Path) -> None:
    """--quiet: the run's two last lines and nothing of W&B's own (its banner, history and
    summary are about 34 lines otherwise), in a process where W&B was never told to be silent."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "WANDB_SILENT"}
    env.update(WANDB_MODE="offline", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "evohpo", "train", *ARGS, "--steps", "32",
                           "--run-dir", str(tmp_path / "r"), "--wandb"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and len(proc.stdout.strip().splitlines()) == 2, proc.stderr
    assert proc.stdout.startswith("done: ")
    assert list((tmp_path / "r").glob("wandb/offline-run-*"))  # and W&B did log the run


@pytest.mark.parametrize("env_mode", ["offline", "dryrun", "disabled"])
def test_bare_wandb_follows_wandb_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       env_mode: str) -> None:
    monkeypatch.setenv("WANDB_MODE", env_mode)
    run = tmp_path / "r"
    assert main(["train", *ARGS, "--run-dir", str(run), "--wandb"]) == 0
    mode = C.read_yaml(run / "config.yaml")["logging"]["wandb"]["mode"]
    assert mode == ("disabled" if env_mode == "disabled" else "offline")
    assert bool(list(run.glob("wandb/offline-run-*"))) == (mode == "offline")
    named = main(["train", *ARGS, "--run-dir", str(tmp_path / "o"), "--wandb", "disabled"])
    assert named == 0 and not (tmp_path / "o" / "wandb").exists()  # a named mode is that mode


def test_overwrite_replaces_the_old_runs_wandb_files(tmp_path: Path) -> None:
    run = tmp_path / "r"
    assert main(["train", *ARGS, "--run-dir", str(run), "--wandb", "offline"]) == 0
    old = {p.name for p in (run / "wandb").iterdir() if p.name.startswith("offline-run")}
    assert len(old) == 1
    assert main(["train", *ARGS, "--run-dir", str(run), "--wandb", "offline", "--overwrite"]) == 0
    new = {p.name for p in (run / "wandb").iterdir() if p.name.startswith("offline-run")}
    assert len(new) == 1 and new != old


def test_wandb_config_is_validated() -> None:
    with pytest.raises(C.ConfigError, match=r"logging\.wandb\.mode"):
        C.load([{"logging": {"wandb": {"mode": "sometimes"}}}])
    with pytest.raises(C.ConfigError, match=r"logging\.wandb\.project"):
        C.load([{"logging": {"wandb": {"project": "a/b"}}}])
    assert C.Config().logging.wandb.mode == "disabled"  # the main job needs no account
