"""The notebooks run top to bottom (their committed QUICK settings) and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
NAMES = ["01_quickstart.ipynb", "02_disease_collateral.ipynb", "03_biodivergence.ipynb"]


def test_the_three_notebooks_exist_and_are_stripped():
    import nbformat

    assert [path.name for path in NOTEBOOKS] == NAMES
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code, path.name
        assert all(not cell.outputs and cell.execution_count is None for cell in code), (
            f"{path.name} has outputs"
        )
        assert "QUICK = True" in code[0].source, f"{path.name}: the first code cell sets QUICK = True"


# slow: a kernel start plus the notebook in quick settings: 15-60 s each on a loaded 2-core machine
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) when a cell fails
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
