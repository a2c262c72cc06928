"""``madrag data``: where the data shipped with madrag lies, so commands can name its files from any folder."""

from __future__ import annotations

from typing import Annotated

import typer

from madrag.data.shipped import ASAP_DATA, ASAP_RUBRICS, find_asap_dir

data_app = typer.Typer(help="The data shipped with madrag (ASAP sets 7 and 8 and their rubrics).", no_args_is_help=True)


@data_app.command("asap")
def asap_command(
    file: Annotated[
        str | None,
        typer.Argument(help="Print one file's path: 'essays', 'rubric7' or 'rubric8' (default: the folder)."),
    ] = None,
) -> None:
    """Print the ASAP folder ($MADRAG_ASAP_DIR, else the package's own copy), or one of its files."""
    folder = find_asap_dir()
    names = {"essays": ASAP_DATA, **{f"rubric{k}": v for k, v in ASAP_RUBRICS.items()}}
    if file is None:
        typer.echo(str(folder))
        return
    if file not in names:
        raise typer.BadParameter(f"one of {', '.join(names)}, got {file!r}", param_hint="FILE")
    typer.echo(str(folder / names[file]))
