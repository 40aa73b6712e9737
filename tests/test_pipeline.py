"""The real Snakemake commands, end to end, at the smoke scale; the paper-scale DAG as a dry run (DVC: test_dvc.py)."""

from __future__ import annotations

import csv
import re

import pytest
from helpers import ROOT, evaluation, job_counts, run, workflow_copy

from tradeoff.config import load_catalog
from tradeoff.storage.provenance import read_sidecar

pytestmark = pytest.mark.slow
SMOKE = ["--configfile", "config/smoke.yaml"]


@pytest.fixture(scope="module")
def smoke_build(smoke_clone):
    """Every target and the summary at the smoke scale: the README's command in a fresh clone, nothing activated
    (tests/conftest.py; tests/test_readme_commands.py runs the README's other commands there)."""
    return smoke_clone


def test_snakemake_builds_table1_with_paper_numbers(smoke_build):
    tables = smoke_build / "results" / "smoke" / "tables"
    for name in ("table1", "table1a", "table1b"):
        for suffix in (".md", ".csv", ".tex"):
            assert (tables / f"{name}{suffix}").stat().st_size > 0
    with open(tables / "table1a.csv") as f:
        cells = {(r["row"], r["column"], r["protocol"]): r for r in csv.DictReader(f)}
    assert cells[("nt", "nat", "strong")]["paper"] == "93.0400"
    assert cells[("at_beta1", "pgd20", "strong")]["paper"] == "48.2900"
    for (row, column, protocol), cell in cells.items():
        assert cell["ours"] != "", f"no measurement for {row}/{column} ({protocol})"
        assert 0.0 <= float(cell["ci_low"]) <= float(cell["ours"]) <= float(cell["ci_high"]) <= 100.0
        assert float(cell["diff"]) == pytest.approx(float(cell["ours"]) - float(cell["paper"]), abs=1e-3)
        assert cell["examples"] == "64" and cell["metrics"].startswith("results/smoke/metrics/")
    md = (tables / "table1.md").read_text()
    assert "Table 1(a)" in md and "Table 1(b)" in md and "AT (β=1)" in md and "Scale: **smoke**" in md


def test_every_latex_table_compiles(smoke_build, tmp_path):
    from test_report_trust import compile_latex

    compile_latex(sorted((smoke_build / "results" / "smoke" / "tables").glob("*.tex")), tmp_path)


def test_a_changed_target_setting_rebuilds_that_target_only(smoke_build):
    """A figure's title or a table's rows live in the config, not in any input file: they are the report job's
    params, so editing them re-runs that report (and the summary and groups that read it), nothing else. Here that
    is two tables: table5, and zipper_table7, whose title said "= table5 at this scale" until table5's rows changed
    (the target a report repeats is part of its params: Catalog.report_settings)."""
    overlay = smoke_build / "config" / "retitle.yaml"
    overlay.write_text("targets:\n  figure1:\n    title: Another title\n  table5:\n    rows:\n"
                       "      - {key: generalist_lr_nt0.1_at0.01, run: cifar10-resnet18-generalist, label: Mine}\n")
    try:
        out = run(["snakemake", "-n", "--cores", "1", *SMOKE, "config/retitle.yaml"], smoke_build)
    finally:
        overlay.unlink()
    assert job_counts(out.stdout + out.stderr) == {"figure": 1, "table": 2, "summary": 1, "all": 1}
    assert "zipper_table7" in out.stdout + out.stderr


def test_metrics_record_how_they_were_made(smoke_build):
    metrics, preds = evaluation(smoke_build, "cifar10-resnet18-at-beta1", "pgd20")
    assert metrics["type"] == "pgd" and metrics["params"]["steps"] == 3  # smoke caps attack steps
    assert metrics["eps"] == pytest.approx(0.3)
    assert metrics["examples"] == 64 and metrics["seed"] == 0
    assert metrics["accuracy"] <= metrics["clean_accuracy"]
    assert "provenance" not in metrics and "seconds" not in metrics  # they are in each metrics file's sidecar
    files = sorted((smoke_build / "results" / "smoke" / "metrics").rglob("*.json"))
    sidecars = [f for f in files if f.name.endswith(".provenance.json")]
    assert sidecars and len(sidecars) * 2 == len(files)
    assert all({"torch", "snakemake", "python"} <= set(read_sidecar(f.with_name(f.name.removesuffix(
        ".provenance.json")))["provenance"]["versions"]) for f in sidecars)
    # what a report checks against the config of the cell it fills (tradeoff.report.records)
    assert (metrics["run"], metrics["scale"], metrics["dataset"], metrics["arch"]) == (
        "cifar10-resnet18-at-beta1", "smoke", "digits", "small_cnn")
    assert metrics["spec"]["steps"] == 3 and metrics["test_examples"] == 64 and metrics["test_size"] == 360
    assert len(metrics["spec_digest"]) == 16 and len(metrics["model"]) == 16
    assert len(preds["robust_correct"]) == 64 and set(preds["robust_correct"]) <= {"0", "1"}


def test_second_snakemake_run_does_nothing(smoke_build):
    out = run(["snakemake", "table1", "-n", "--cores", "2", *SMOKE], smoke_build)
    assert "Nothing to be done" in out.stdout + out.stderr


def test_config_error_stops_snakemake_before_any_job(tmp_path):
    work = workflow_copy(tmp_path)
    bad = work / "config" / "bad.yaml"
    bad.write_text("runs:\n  cifar10-resnet18-nt:\n    method: {name: madry}\n")
    out = run(["snakemake", "table1", "--cores", "1", "--configfile", "config/smoke.yaml", "config/bad.yaml"], work, check=False)
    assert out.returncode != 0
    assert "runs.cifar10-resnet18-nt.method.name: unknown method 'madry'" in out.stdout + out.stderr
    assert not (work / "results").exists()
    out = run(["snakemake", "table1", "--cores", "1", "--config", "scale=demo", *SMOKE], work, check=False)
    assert out.returncode != 0 and "--config key=value overrides are not supported" in out.stdout + out.stderr


def test_paper_scale_dry_run_through_slurm_profile(tmp_path):
    work = workflow_copy(tmp_path)
    out = run(["snakemake", "-n", "--profile", "slurm", "table1"], work)
    text = out.stdout + out.stderr
    counts = job_counts(text)
    # table1 = table1a (ResNet-18) + table1b (WRN-32-10): one training job per row, one evaluation job per
    # (row, column), and per (row, column) that the authors' evaluation runs differently (generalist-code: PGD20,
    # PGD100 and CW; its MIM is the column's); the paper's Table 1 has 9 rows and 11 columns in each half
    catalog = load_catalog([work / "config" / "config.yaml"])
    rows = [r.run for t in ("table1a", "table1b") for r in catalog.targets[t].rows]
    columns = catalog.targets["table1a"].columns
    assert len(rows) == 18 and len(columns) == 11
    assert counts["download"] == 1
    assert counts["train"] == len(set(rows))
    assert counts["evaluate"] == len(set(rows)) * (len(columns) + 3)
    # table1a, table1b and the group's table1 are jobs of the wildcard rule `table`; `table1` (the alias) asks for them
    assert counts["table"] == 3 and counts["table1"] == 1 and "table1a" not in counts
    assert "cifar10" in text and "wrn-32-10" in text or "cifar10-wrn32" in text
    train_jobs = re.findall(r"rule train:.*?(?=\n\n|\Z)", text, flags=re.S)
    assert train_jobs and all("gpu=1" in job for job in train_jobs)
    eval_jobs = re.findall(r"rule evaluate:.*?(?=\n\n|\Z)", text, flags=re.S)
    assert eval_jobs and all("gpu=1" in job for job in eval_jobs)


def test_shipped_dvc_yaml_is_current(tmp_path):
    """dvc.yaml and jobs.json are derived from the catalog and the code's imports (tests/test_dvc.py runs them);
    editing the config or an import without regenerating them fails here."""
    out = run(["tradeoff", "export-dvc", "--check"], ROOT, check=False)
    assert out.returncode == 0, out.stderr


def test_html_report_renders_in_a_real_browser(smoke_build):
    """`snakemake --report` is a page people open: load it in headless Chromium, open every table and figure,
    check that each renders, and keep screenshots under test-artifacts/."""
    import shutil

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    run(["snakemake", "--report", "report.html", *SMOKE], smoke_build)
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    wait = WebDriverWait(driver, 60)  # waits for what the page shows, not for a time: a loaded machine is slower
    seen = {"tables": 0, "figures": 0, "summary": 0}  # the report's categories (workflow/rules/report.smk)

    def category_link(name):
        return wait.until(EC.element_to_be_clickable((By.XPATH, f"//*[normalize-space(text())='{name}']")))

    def show(name):
        """Open a file of the report (its eye button) and return the element that shows it: the iframe (HTML) or
        image whose data URL names the file. The click is repeated until it does: a click that lands before the
        page's scripts have bound it does nothing."""
        tag = "iframe" if name.endswith(".html") else "img"
        marker = f"filename={name.rsplit('/', 1)[-1]};"

        def shown(d):
            found = [e for e in d.find_elements(By.TAG_NAME, tag) if marker in (e.get_attribute("src") or "")]
            if not found:
                row = d.find_element(By.XPATH, f"//td[normalize-space(text())='{name}']/ancestor::tr")
                row.find_elements(By.XPATH, ".//a|.//button")[0].click()
            return found

        return wait.until(shown)

    try:
        driver.get(f"file://{smoke_build / 'report.html'}")
        category_link("summary")  # the page's menu has rendered
        driver.save_screenshot(str(artifacts / "report-home.png"))
        for category in seen:
            driver.get(f"file://{smoke_build / 'report.html'}")
            category_link(category).click()
            entries = wait.until(EC.presence_of_all_elements_located((By.XPATH, "//td[contains(text(), 'results/')]")))
            names = [e.text for e in entries]
            for name in names:
                shown = show(name)
                stem = name.rsplit("/", 1)[-1].replace(".", "_")
                if name.endswith(".html"):
                    driver.switch_to.frame(shown[0])
                    rows = wait.until(EC.presence_of_all_elements_located((By.XPATH, "//table//tr")))
                    assert len(rows) >= 2, f"{name}: no table rows rendered"
                    driver.switch_to.default_content()
                else:
                    def rendered(d):
                        return any(d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i)
                                   for i in shown)
                    assert wait.until(rendered), f"{name}: image did not render"
                driver.save_screenshot(str(artifacts / f"report-{stem}.png"))
                seen[category] += 1
        # the summary page on its own (issue 40): the verdict table, the forest plot loaded, a claim's details open
        driver.get(f"file://{smoke_build / 'results' / 'smoke' / 'summary.html'}")
        head = wait.until(EC.presence_of_element_located((By.XPATH, "//table//th[normalize-space(.)='Verdict']")))
        verdicts = head.find_elements(By.XPATH, "ancestor::table//tbody/tr")
        assert len(verdicts) >= 10, f"the verdict table shows {len(verdicts)} claims"
        plot = wait.until(EC.presence_of_element_located((By.XPATH, "//img[@class='claims']")))
        assert wait.until(lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0",
                                                     plot)), "summary.html: the forest plot did not load"
        details = driver.find_elements(By.TAG_NAME, "details")
        assert details and details[0].get_attribute("open") is None
        details[0].find_element(By.TAG_NAME, "summary").click()
        assert wait.until(lambda d: details[0].get_attribute("open") is not None), "a claim's details did not open"
        driver.save_screenshot(str(artifacts / "summary-page.png"))
    finally:
        driver.quit()
    assert seen["tables"] >= 2 and seen["figures"] >= 2 and seen["summary"] == 2  # the page and its forest plot


def test_the_readmes_plot_of_the_tidy_file_runs_as_written(smoke_build, tmp_path):
    """README "Reading a table": its Python block (the demo read as the smoke scale) draws a plot of its own from
    results/<scale>/cells.csv, in the build's folder."""
    import sys

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?tradeoff\.results\.load.*?)```", text, re.S).group(1)
    plot = smoke_build / "aa.png"
    code = block.replace('load("demo")', 'load("smoke")').replace('"aa.png"', repr(str(plot)))
    assert len(block.strip().splitlines()) <= 6
    run([sys.executable, "-c", code], smoke_build)
    assert plot.is_file() and plot.read_bytes()[:4] == b"\x89PNG"
    plot.unlink()
