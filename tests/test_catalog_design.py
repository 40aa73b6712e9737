"""The compact catalog (tradeoff.config.design: the run design, targets' `{family}` rows) and what it resolves to.

tests/data/resolved_runs.json was recorded from the run-by-run config.yaml before it became compact: for each scale
(config.yaml alone, + demo.yaml, + smoke.yaml) every run id in catalog order with its spec_digest and train_id, the
seed runs, and a digest of every target, and a digest of the whole config that tradeoff.config reads (recorded from that commit's files
afterwards). The compact files must resolve to exactly the same; a run or a target added since (a new method's rows)
is growth, left out of the comparison, not a change. A deliberate change of the recorded catalog records it again:
`python tests/test_catalog_design.py --write` (and the diff shows what changed).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from tradeoff import config as cfg
from tradeoff.config.design import expand, expand_design, id_part

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "resolved_runs.json"
SCALES = {"paper": ["config.yaml"], "demo": ["config.yaml", "demo.yaml"], "smoke": ["config.yaml", "smoke.yaml"]}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def resolved(files: list[str], config_dir: Path = ROOT / "config", recorded: dict | None = None) -> dict:
    """What a scale's catalog resolves to: run id -> [spec digest, train id] (catalog order), the seed runs, target
    name -> a digest of the target, and a digest of the whole config as tradeoff.config reads it (run by run); with
    ``recorded`` (a snapshot's scale), that digest leaves out the runs and targets the snapshot does not hold."""
    catalog = cfg.load_catalog([config_dir / f for f in files], write_cache=False)
    config = catalog.config
    if recorded is not None:
        config = {**config, "runs": {r: v for r, v in config["runs"].items() if r in recorded["runs"]},
                  "targets": {t: v for t, v in config["targets"].items() if t in recorded["targets"]}}
    return {"runs": {rid: [cfg.spec_digest(spec), catalog.train_id[rid]] for rid, spec in catalog.runs.items()},
            "seed_runs": catalog.seed_runs,
            "targets": {name: _digest(target.as_dict()) for name, target in catalog.targets.items()},
            "config": {"digest": _digest(config)}}


def _dump(snapshot: dict) -> str:
    """One line per run, seed group and target: small diffs when the catalog changes."""
    out = ["{"]
    for i, (scale, parts) in enumerate(snapshot.items()):
        out.append(f" {json.dumps(scale)}: {{")
        for j, (part, entries) in enumerate(parts.items()):
            lines = [f"   {json.dumps(k)}: {json.dumps(v)}" for k, v in entries.items()]
            out.append(f"  {json.dumps(part)}: {{\n" + ",\n".join(lines) + "\n  }" + ("," if j < len(parts) - 1 else ""))
        out.append(" }" + ("," if i < len(snapshot) - 1 else ""))
    out.append("}")
    return "\n".join(out) + "\n"



# ------------------------------------------------------------------------------------ the shipped catalog


def check_resolves_as_recorded(got: dict, expected: dict) -> None:
    """Every recorded run resolves as recorded (in the same order among them: spec digest, training job), every
    recorded seed group and target too, and the config without what was added since is the recorded one. A run or a
    target added since is growth, not a change (a new method's rows: docs/extending.md)."""
    assert [r for r in got["runs"] if r in expected["runs"]] == list(expected["runs"])  # every one, in order
    assert {r: got["runs"][r][0] for r in expected["runs"]} == {r: v[0] for r, v in expected["runs"].items()}
    assert {r: got["runs"][r][1] for r in expected["runs"]} == {r: v[1] for r, v in expected["runs"].items()}
    assert {r: got["seed_runs"].get(r) for r in expected["seed_runs"]} == expected["seed_runs"]
    assert {t: got["targets"].get(t) for t in expected["targets"]} == expected["targets"]
    assert got["config"] == expected["config"]  # attacks, presets, scales...: the whole config, run by run


@pytest.mark.parametrize("scale", list(SCALES))
def test_compact_catalog_resolves_as_the_run_by_run_one(scale):
    """Every scale resolves to the runs (ids in order, spec digests, training jobs), seed runs and targets that the
    run-by-run config.yaml resolved to (tests/data/resolved_runs.json); what was added since is left out."""
    expected = json.loads(SNAPSHOT.read_text())[scale]
    check_resolves_as_recorded(resolved(SCALES[scale], recorded=expected), expected)


def test_a_new_run_and_table_are_growth_not_a_change(tmp_path):
    """A variant added to a block (a run in each of its families, amid the recorded ones) and a table of it resolve
    beside the recorded catalog, which is unchanged; changing a recorded run is a change."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    config = tmp_path / "config" / "config.yaml"
    text = config.read_text()
    anchor = "      trades-lambda1: &trades1 {name: trades, lam: 1.0, attack: pgd10}\n"
    assert anchor in text
    text = text.replace(anchor, anchor + "      trades-lambda3: {name: trades, lam: 3.0, attack: pgd10}\n")
    text = text.replace("targets:\n", "targets:\n  lambda3: {kind: table, title: TRADES lambda 3, rows: [{key: t3, run: "
                        "cifar10-resnet18-trades-lambda3}], columns: {nat: clean}}\n", 1)
    config.write_text(text)
    expected = json.loads(SNAPSHOT.read_text())["paper"]
    got = resolved(SCALES["paper"], tmp_path / "config", recorded=expected)
    assert {"cifar10-resnet18-trades-lambda3", "cifar10-wrn32-trades-lambda3"} <= set(got["runs"]) - set(expected["runs"])
    check_resolves_as_recorded(got, expected)
    config.write_text(text.replace("trades-lambda1: &trades1 {name: trades, lam: 1.0,",
                                   "trades-lambda1: &trades1 {name: trades, lam: 1.5,"))
    with pytest.raises(AssertionError):
        check_resolves_as_recorded(resolved(SCALES["paper"], tmp_path / "config", recorded=expected), expected)


def grid_runs(raw: dict) -> list[list[str]]:
    """Runs written one by one (a config file's plain ``runs:``, not changes of designed runs) that differ only in
    their method: each group, a design block's variants written out (its family settings repeated per run)."""
    if not raw.get("runs"):
        return []
    designed = set(expand_design(raw["design"])) if raw.get("design") else set()
    groups: dict[str, list[str]] = {}
    for rid, run in (raw.get("runs") or {}).items():
        if rid not in designed and isinstance(run, dict):
            groups.setdefault(json.dumps({k: v for k, v in run.items() if k != "method"}, sort_keys=True,
                                         default=str), []).append(rid)
    return [ids for ids in groups.values() if len(ids) > 1]


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "config").glob("*.yaml")))
def test_the_shipped_files_write_grids_of_runs_as_designs(name):
    """What the compact catalog protects (it was a third of the run-by-run one): no shipped file writes, one by one,
    runs that differ only in their method (a block's variants); a file may grow by any number of blocks and runs."""
    assert grid_runs(cfg.load_yaml(ROOT / "config" / name)) == []


def test_runs_written_one_by_one_are_found_and_a_new_block_is_not():
    family = {"preset": "p", "dataset": "cifar10", "arch": "resnet18"}
    raw = {"runs": {"a-nt": {**family, "method": {"name": "nt"}}, "a-at": {**family, "method": {"name": "pgd_at"}},
                    "b-nt": {**family, "arch": "wrn-32-10", "method": {"name": "nt"}}}}
    assert grid_runs(raw) == [["a-nt", "a-at"]]
    grown = cfg.load_yaml(ROOT / "config" / "config.yaml")
    table1 = grown["design"]["generalist-table1"]["variants"]
    grown["design"] = {**grown["design"], **{f"more{i}": {"families": {f"cifar10-more{i}": family}, "variants": table1}
                                             for i in range(50)}}
    grown["runs"] = {**raw["runs"], "a-at": {**family, "preset": "q", "method": {"name": "pgd_at"}}}
    assert grid_runs(grown) == []  # growth by blocks is what the design is for, and one-off runs


@pytest.mark.parametrize("scale", list(SCALES))
def test_the_files_validate_as_written_and_expanded(scale):
    """Snakemake validates the files' merge as written (compact: design, plain runs, `{family}` rows) against the
    schema, and tradeoff.config the expanded form: the schema takes both. PyYAML's safe loader (Snakemake's) reads
    the files as tradeoff's loader does (anchors and aliases, no merge keys)."""
    import jsonschema
    import yaml

    raw: dict = {}
    plain: dict = {}
    for name in SCALES[scale]:
        raw = cfg.merge(raw, cfg.load_yaml(ROOT / "config" / name))
        plain = cfg.merge(plain, yaml.safe_load((ROOT / "config" / name).read_text()))
    assert plain == raw and "design" in raw
    schema = cfg.load_yaml(cfg.SCHEMA)
    jsonschema.validate(raw, schema)
    expanded = expand(raw)
    assert "design" not in expanded and not any("family" in t for t in expanded["targets"].values())
    jsonschema.validate(expanded, schema)


# -------------------------------------------------------------------------------------------- expansion

GEN = {"name": "generalist", "attack": "pgd10", "c": 5, "nt_optimizer": {"name": "sgd", "momentum": 0.9}}


def test_families_cross_variants_in_order_over_settings_and_base():
    design = {"b": {
        "settings": {"seeds": [0, 1]},
        "families": {"cifar10-resnet18": {"preset": "p18", "dataset": "cifar10", "arch": "resnet18"},
                     "cifar10-wrn32": {"preset": "p32", "dataset": "cifar10", "arch": "wrn-32-10"}},
        "base": GEN,
        "variants": {"nt": {"name": "nt"},                                        # another method: stands alone
                     "generalist": {},                                            # the base
                     "generalist-adam": {"nt_optimizer": {"name": "adam"}}},      # key by key: replaces nt_optimizer
        "runs": {"cifar10-wrn32-nt": {"epochs": 3, "method": {"note": 1}}},       # merged last, recursively
    }}
    runs = expand_design(design)
    assert list(runs) == ["cifar10-resnet18-nt", "cifar10-resnet18-generalist", "cifar10-resnet18-generalist-adam",
                          "cifar10-wrn32-nt", "cifar10-wrn32-generalist", "cifar10-wrn32-generalist-adam"]
    assert runs["cifar10-resnet18-nt"] == {"seeds": [0, 1], "preset": "p18", "dataset": "cifar10", "arch": "resnet18",
                                           "method": {"name": "nt"}}
    assert runs["cifar10-wrn32-generalist"]["method"] == GEN
    assert runs["cifar10-wrn32-generalist-adam"]["method"] == {**GEN, "nt_optimizer": {"name": "adam"}}
    assert runs["cifar10-wrn32-nt"]["epochs"] == 3 and runs["cifar10-wrn32-nt"]["method"] == {"name": "nt", "note": 1}
    assert "epochs" not in runs["cifar10-resnet18-nt"]


def test_a_placeholder_sweeps_the_list_given_for_it():
    variants = [{"caat-ce-gamma{gamma}": {"name": "caat", "gamma": [0.7, 0.75, 1.0], "adv_loss": "ce"}},
                {"v-{adv_loss}-lambda{lam}": {"name": "vanilla", "adv_loss": ["ce", "clp"], "lam": [0.25, 1]}},
                {"generalist-c{c}": {"c": [1, 12]}}]  # a list of tables: taken in order
    runs = expand_design({"b": {"families": {"f": {"dataset": "cifar10"}}, "base": GEN, "variants": variants}})
    assert list(runs) == ["f-caat-ce-gamma0_7", "f-caat-ce-gamma0_75", "f-caat-ce-gamma1",
                          "f-v-ce-lambda0_25", "f-v-ce-lambda1", "f-v-clp-lambda0_25", "f-v-clp-lambda1",
                          "f-generalist-c1", "f-generalist-c12"]
    assert runs["f-caat-ce-gamma0_75"]["method"] == {"name": "caat", "gamma": 0.75, "adv_loss": "ce"}
    assert runs["f-v-clp-lambda0_25"]["method"] == {"name": "vanilla", "adv_loss": "clp", "lam": 0.25}
    assert runs["f-generalist-c12"]["method"] == {**GEN, "c": 12}
    assert [id_part(v, "k") for v in (0.25, 1.0, 12, 1e-4, "ce")] == ["0_25", "1", "12", "0_0001", "ce"]


def test_plain_runs_follow_the_design_and_targets_family_fills_rows():
    config = {"design": {"b": {"families": {"f": {"dataset": "d"}}, "variants": {"nt": {"name": "nt"}}}},
              "runs": {"mine": {"dataset": "d", "method": {"name": "nt"}}},
              "targets": {"t": {"kind": "table", "family": "f", "rows": [{"key": "a", "run": "{family}-nt"},
                                                                        {"key": "b", "run": "mine"}]},
                          "g": {"kind": "group", "targets": ["t"]}}}
    before = copy.deepcopy(config)
    out = expand(config)
    assert config == before  # pure
    assert list(out) == ["runs", "targets"] and list(out["runs"]) == ["f-nt", "mine"]
    assert out["runs"]["f-nt"] == {"dataset": "d", "method": {"name": "nt"}, "seed": 0}  # a designed run: seed 0
    assert out["runs"]["mine"] == config["runs"]["mine"]                                # a plain run: as written
    assert out["targets"]["t"] == {"kind": "table", "rows": [{"key": "a", "run": "f-nt"}, {"key": "b", "run": "mine"}]}
    assert out["targets"]["g"] == config["targets"]["g"]
    assert expand({"runs": {"mine": {}}, "targets": {}}) == {"runs": {"mine": {}}, "targets": {}}  # nothing to do


def test_expanded_config_shares_no_part():
    """YAML aliases share objects; the expansion copies them apart, so that changing one target's columns changes
    that target only (and yaml.dump writes no alias)."""
    columns = {"nat": "clean"}
    rows = [{"key": "a", "run": "{family}-nt"}]
    config = {"design": {"b": {"families": {"f": {"dataset": "d"}, "g": {"dataset": "d"}},
                               "variants": {"nt": {"name": "nt"}}}},
              "targets": {"t": {"family": "f", "rows": rows, "columns": columns},
                          "u": {"family": "g", "rows": rows, "columns": columns}}}
    out = expand(config)
    assert out["targets"]["t"]["columns"] is not out["targets"]["u"]["columns"]
    seen: set[int] = set()

    def walk(value):
        if isinstance(value, (dict, list)):
            assert id(value) not in seen
            seen.add(id(value))
            for v in value.values() if isinstance(value, dict) else value:
                walk(v)

    walk(out)
    assert [r["run"] for r in out["targets"]["u"]["rows"]] == ["g-nt"]


def test_a_plain_run_of_a_designed_id_changes_that_run():
    """As an overlay's `runs.<id>` changed the run of that id when every run was written out (the files merge)."""
    config = {"design": {"b": {"families": {"f": {"dataset": "d"}}, "settings": {"seeds": [0, 1]},
                               "variants": {"nt": {"name": "nt"}, "at": {"name": "pgd_at", "beta": 1.0}}}},
              "runs": {"f-at": {"epochs": 3, "method": {"beta": 0.5}}, "f-nt": {"seeds": [4]}}}
    runs = expand(config)["runs"]
    assert list(runs) == ["f-nt", "f-at"]
    assert runs["f-at"] == {"dataset": "d", "seeds": [0, 1], "method": {"name": "pgd_at", "beta": 0.5}, "epochs": 3}
    assert runs["f-nt"] == {"dataset": "d", "seeds": [4], "method": {"name": "nt"}}  # seeds: no default seed


def test_an_overlay_changes_a_designed_run_or_adds_a_block(tmp_path):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(
        "design:\n"
        "  generalist-table1:\n"
        "    runs:\n"
        "      cifar10-resnet18-nt: {epochs: 3}\n"
        "  mine:\n"
        "    families: {digits-small_cnn: {preset: generalist-resnet18, dataset: digits, arch: small_cnn}}\n"
        "    variants:\n"
        "      trades-lambda{lam}: {name: trades, lam: [1.0, 3.0], attack: pgd10}\n")
    config = cfg.load_config([ROOT / "config" / "config.yaml", overlay])
    assert config["runs"]["cifar10-resnet18-nt"]["epochs"] == 3
    assert list(config["runs"])[-2:] == ["digits-small_cnn-trades-lambda1", "digits-small_cnn-trades-lambda3"]
    catalog = cfg.resolve(config)
    assert catalog.runs["cifar10-resnet18-nt"].epochs == 3
    assert catalog.runs["digits-small_cnn-trades-lambda3"].method.params["lam"] == 3.0


@pytest.mark.parametrize(("design", "expected"), [
    ([], r"^design: expected a mapping of blocks"),
    ({"b": {"families": {"f": {}}, "variant": {}}}, r"^design\.b: unknown key\(s\) \['variant'\]; allowed: "),
    ({"b": {"families": {"f": {}}}}, r"^design\.b: a block needs `variants`"),
    ({"b": {"families": {}, "variants": {"nt": {"name": "nt"}}}}, r"^design\.b\.families: expected a non-empty"),
    ({"b": {"families": {"f": {}}, "variants": {"v": {"lam": 1}}}},
     r"^design\.b\.variants\.v: no method: give `name`"),
    ({"b": {"families": {"f": {}}, "variants": {"v": "nt"}}}, r"^design\.b\.variants\.v: expected a mapping"),
    ({"b": {"families": {"f": {}}, "variants": [{"v": {"name": "nt"}}, {"w{lam}": {"name": "vanilla"}}]}},
     r"^design\.b\.variants\[1\]\.w\{lam\}\.lam: the id sweeps \{lam\}: give a non-empty list"),
    ({"b": {"families": {"f": {}}, "variants": {"w{lam}": {"name": "vanilla", "lam": [True]}}}},
     r"^design\.b\.variants\.w\{lam\}\.lam: a swept value must be a number or a name"),
    ({"b": {"families": {"f": {}}, "variants": {"w{lam": {"name": "vanilla"}}}}, r"placeholder is written"),
    ({"b": {"families": {"f": {}}, "variants": {"w{lam}": {"name": "vanilla", "lam": [1, 1.0]}}}},
     r"^design\.b\.variants\.w\{lam\}: run id 'f-w1' is made twice in design\.b"),
    ({"b": {"families": {"f": {}}, "variants": {"nt": {"name": "nt"}}},
      "c": {"families": {"f": {}}, "variants": {"nt": {"name": "nt"}}}},
     r"^design\.c: run id 'f-nt' is also made by design\.b"),
    ({"b": {"families": {"f": {}}, "variants": {"nt": {"name": "nt"}}, "runs": {"f-tn": {"epochs": 1}}}},
     r"^design\.b\.runs\.f-tn: unknown run of this block 'f-tn'"),
    ({"b": {"families": {"f": {"method": {"name": "nt"}}}, "variants": {"nt": {"name": "nt"}}}},
     r"^design\.b\.families\.f\.method: a family holds run settings"),
    ({"b": {"settings": {"method": {}}, "families": {"f": {}}, "variants": {"nt": {"name": "nt"}}}},
     r"^design\.b\.settings\.method: "),
    ({"b": {"base": {"lam": 1}, "families": {"f": {}}, "variants": {"nt": {}}}},
     r"^design\.b\.base: give the method's `name`"),
])
def test_a_bad_design_names_the_key(design, expected):
    with pytest.raises(cfg.ConfigError, match=expected):
        expand({"design": design})


@pytest.mark.parametrize(("config", "expected"), [
    ({"targets": {"t": {"rows": [{"key": "a", "run": "x"}, {"key": "b", "run": "{family}-nt"}]}}},
     r"^targets\.t\.rows\[1\]\.run: '\{family\}-nt' names \{family\}, but the target has no `family`"),
    ({"targets": {"t": {"family": None, "rows": [{"key": "b", "run": "{family}-nt"}]}}},
     r"^targets\.t\.rows\[0\]\.run: "),
    ({"targets": {"t": {"family": ["f"], "rows": []}}}, r"^targets\.t\.family: expected the run-id prefix"),
])
def test_bad_runs_or_families_name_the_key(config, expected):
    with pytest.raises(cfg.ConfigError, match=expected):
        expand(config)


def test_load_config_names_the_key_of_a_bad_design(tmp_path):
    overlay = tmp_path / "bad.yaml"
    overlay.write_text("design:\n  caat-cifar10:\n    runs: {cifar10-resnet18-caat-ce-gamma0_77: {epochs: 3}}\n")
    with pytest.raises(cfg.ConfigError, match=r"design\.caat-cifar10\.runs\.cifar10-resnet18-caat-ce-gamma0_77: "
                                              r"unknown run of this block .*did you mean 'cifar10-resnet18-caat-ce-"
                                              r"gamma0_7"):
        cfg.load_config([ROOT / "config" / "config.yaml", overlay])


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_catalog_design.py --write   (records the current catalog)")
    snapshot = {scale: resolved(files) for scale, files in SCALES.items()}
    text = _dump(snapshot)
    assert json.loads(text) == snapshot
    SNAPSHOT.write_text(text)
    print(f"wrote {SNAPSHOT}: " + ", ".join(f"{s} {len(v['runs'])} runs" for s, v in snapshot.items()))
