"""The MADRAG paper's error-analysis tables (3, 4, 5, 10, 11) from a hand-coded error export
(tests/data/coded_errors_sample.csv: 10 rows, some codes left empty, one cell with the code's label)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from typer import Typer
from typer.testing import CliRunner

from madrag.cli.evaluate import errors_command
from madrag.errors import InputError
from madrag.paper.coding.coded_tables import read_coded, tabulate

SAMPLE = Path(__file__).parents[3] / "data" / "coded_errors_sample.csv"


def test_read_coded_takes_codes_and_the_direction() -> None:
    coded = read_coded(SAMPLE)
    assert len(coded) == 10
    assert coded["A"].tolist() == ["A1", "A1", "A1", "A1", "A2", "A2", "A1", "A2", "A1", "A1"]
    assert coded.loc[3, "C"] == "C2"  # "C2 debate framing capture"
    assert coded.loc[9, "B"] == "B1"  # "b1"
    assert coded.loc[8, ["B", "D"]].isna().all() and coded.loc[9, ["C", "D"]].isna().all()


def test_marginals_of_table_3_and_5() -> None:
    tables = tabulate(SAMPLE)
    assert tables.n_rows == 10 and tables.uncoded == {"A": 0, "B": 1, "C": 1, "D": 2}
    c = tables.tables["table3_C"]
    assert c.index.tolist() == ["C2", "C6", "C1", "C3", "C4", "C5"]  # most frequent first, ties in code order
    assert c["count"].tolist() == [3, 2, 1, 1, 1, 1] and c["%"].tolist() == [33.3, 22.2, 11.1, 11.1, 11.1, 11.1]
    assert c.loc["C2", "label"] == "Debate framing capture"
    d = tables.tables["table3_D"]
    assert d.index.tolist() == ["D1", "D3", "D4", "D2"] and d["%"].tolist() == [37.5, 25.0, 25.0, 12.5]
    b = tables.tables["table5_B"]
    assert b.index.tolist() == ["B1", "B0", "B2"] and b["count"].tolist() == [7, 1, 1]
    per_trait = tables.tables["table5_B_per_trait"]
    assert per_trait.columns.tolist() == ["N", "B0", "B1", "B2"]
    assert per_trait.loc["Conventions"].tolist() == [2, 1, 1, 0]  # e9 has no B code
    assert per_trait.loc["Ideas"].tolist() == [2, 0, 1, 1] and per_trait.loc["Word Choice"].tolist() == [1, 0, 1, 0]


def test_cross_tables_4_10_11() -> None:
    tables = tabulate(SAMPLE).tables
    a_c, a_c_pct = tables["table4_AxC_counts"], tables["table4_AxC_pct"]
    assert a_c.loc["A1"].tolist() == [1, 3, 0, 0, 0, 2] and a_c.loc["A2"].tolist() == [0, 0, 1, 1, 1, 0]
    assert a_c_pct.loc["A1"].tolist() == [16.7, 50.0, 0.0, 0.0, 0.0, 33.3]
    c_d, c_d_pct = tables["table10_CxD_counts"], tables["table10_CxD_pct"]
    assert c_d.loc["C2"].tolist() == [2, 1, 0, 0] and c_d.loc["C6"].tolist() == [0, 0, 2, 0]
    assert c_d_pct.loc["C2"].tolist() == [66.7, 33.3, 0.0, 0.0]
    assert c_d.loc["C1"].sum() == 0 and all(math.isnan(v) for v in c_d_pct.loc["C1"])  # e9: no D code
    c_b = tables["table11_CxB_counts"]
    assert c_b.columns.tolist() == ["B0", "B1", "B2"]
    assert c_b.loc["C6"].tolist() == [1, 1, 0] and c_b.loc["C4"].tolist() == [0, 0, 1]
    assert int(c_b.to_numpy().sum()) == 8  # rows coded for both B and C


def test_a_value_outside_the_scheme_is_an_error_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(SAMPLE.read_text(encoding="utf-8").replace(",C5,", ",C9,"), encoding="utf-8")
    with pytest.raises(InputError, match=r"line 9, code_C_mechanism.*'C9' is not one of C1, C2"):
        tabulate(bad)
    with pytest.raises(InputError, match="not found"):
        tabulate(tmp_path / "missing.csv")
    headless = tmp_path / "headless.csv"
    headless.write_text("essay_id,trait,direction\ne1,Voice,A1\n", encoding="utf-8")
    with pytest.raises(InputError, match="code_B"):
        tabulate(headless)


def test_errors_tabulate_command(tmp_path: Path) -> None:
    app = Typer()
    app.command("errors")(errors_command)
    app.command("other")(lambda: None)
    coded = tmp_path / "coded.csv"
    shutil.copy(SAMPLE, coded)
    done = CliRunner().invoke(app, ["errors", "--tabulate", str(coded)])
    assert done.exit_code == 0, done.output
    assert "Table 3: primary failure mechanism (C)" in done.output and "Table 11: C x B, counts" in done.output
    folder = tmp_path / "coded_tables"
    assert (folder / "table10_CxD_pct.csv").is_file() and (folder / "tables.txt").is_file()
    failed = CliRunner().invoke(app, ["errors", "--tabulate", str(coded), "--protocol", "all"])
    assert isinstance(failed.exception, InputError)
