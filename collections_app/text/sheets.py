"""Reading spreadsheets: Excel workbooks (.xlsx, openpyxl in read-only mode) and CSV (the csv module).

Pure. Each sheet is a section, headed by its name, and a page (its place in the workbook, as
`blocks` numbers pages); its first non-empty row is the header, and the rows below it are written as
Markdown table rows in blocks that each repeat the header (`tables.table_blocks`), so a paragraph
holding row 812 still says what each value is. The choice of Markdown rows over ``header: value``
lines was measured (docs/decisions/0042). A CSV file is one sheet without a name or a page.

Bounds: `MAX_ROWS` rows and `tables.MAX_COLUMNS` columns a sheet, `tables.MAX_CELL_CHARS` a cell,
and the document's `MAX_TEXT_CHARS`; rows are read as a stream (read-only mode parses a sheet's XML
as it goes, and CSV is read line by line), and reading stops at whichever bound comes first. A
workbook is checked against the zip limits before openpyxl opens it; formulas give their cached
values (what Excel last showed), never a recalculation. A workbook written by a program that saves
no values (a script, an export) has formula cells with nothing cached: they read as empty, and each
sheet holding some says so in the document's notes ("open and save it in a spreadsheet program"), so
an empty Total column is never silent.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Iterator, Sequence

from .blocks import Block
from .reading import (
    CORRUPT,
    MAX_TEXT_CHARS,
    UNSUPPORTED_TYPE,
    Note,
    Unreadable,
    heading_block,
    open_package,
)
from .tables import MAX_COLUMNS, table_blocks

MAX_ROWS = 100_000
MAX_SHEETS = 200
SNIFF_CHARS = 65536


def read_xlsx(data: bytes, warnings: list[str]) -> Iterator[Block]:
    """The workbook's sheets as blocks; a sheet whose formulas have no saved value is a `Note`."""
    import openpyxl

    open_package(data, "Excel workbook").close()
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # damaged packages surface as zip, XML, key or value errors alike
        raise Unreadable("not a readable Excel workbook", category=CORRUPT) from exc
    try:
        budget = _Budget()
        for number, sheet in enumerate(workbook.worksheets[:MAX_SHEETS], start=1):
            if budget.spent:
                return
            rows = sheet.iter_rows(max_row=MAX_ROWS, max_col=MAX_COLUMNS, values_only=True)
            try:
                yield from _sheet_blocks(sheet.title, rows, budget, number)
            except Unreadable:
                raise
            except Exception:  # one damaged sheet should not cost the others
                warnings.append(f"sheet {sheet.title!r} could not be read")
                continue
            unsaved = _formulas_without_values(workbook, sheet)
            if unsaved:
                warnings.append(
                    Note(
                        f"sheet {sheet.title!r}: {unsaved:,} formula cell{'s' if unsaved != 1 else ''} "
                        "with no saved value read as empty (the file was never opened in a spreadsheet "
                        "program); open and save it in Excel or LibreOffice to have them read"
                    )
                )
    finally:
        workbook.close()


def _formulas_without_values(workbook, sheet) -> int:
    """Cells of the sheet holding a formula (``<f>``) but no cached value (``<v>``), counted from its XML
    as a stream; 0 when that cannot be read (the text is read already, this is only a note)."""
    path = getattr(sheet, "_worksheet_path", None)
    archive = getattr(workbook, "_archive", None)
    if path is None or archive is None:
        return 0
    unsaved = 0
    try:
        with archive.open(path) as source:
            for _event, element in ElementTree.iterparse(source):
                if element.tag.endswith("}c"):
                    children = {child.tag.rsplit("}", 1)[-1]: child for child in element}
                    value = children.get("v")
                    if "f" in children and (value is None or not (value.text or "")):
                        unsaved += 1
                    element.clear()
                elif element.tag.endswith("}row"):
                    element.clear()
    except (ElementTree.ParseError, OSError, KeyError):
        return 0
    return unsaved


def read_csv(data: bytes, _warnings: list[str]) -> Iterator[Block]:
    """One sheet, without a name: its dialect (delimiter, quoting) sniffed from its opening."""
    head = data[: MAX_TEXT_CHARS * 4 + 4]
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=len(head) == len(data))
    except UnicodeDecodeError as exc:
        raise Unreadable("not UTF-8 text", category=UNSUPPORTED_TYPE) from exc
    del head
    try:
        dialect = csv.Sniffer().sniff(text[:SNIFF_CHARS], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel  # one column, or nothing to tell by: commas
    rows = itertools.islice(csv.reader(io.StringIO(text), dialect), MAX_ROWS)
    try:
        yield from _sheet_blocks("", rows, _Budget(), None)
    except csv.Error as exc:  # a field over the csv module's limit, a NUL byte
        raise Unreadable("not a readable CSV file", category=CORRUPT) from exc


class _Budget:
    """The characters a workbook has given so far, against MAX_TEXT_CHARS."""

    def __init__(self) -> None:
        self.used = 0

    @property
    def spent(self) -> bool:
        return self.used > MAX_TEXT_CHARS


def _sheet_blocks(
    title: str, rows: Iterable[Sequence[object]], budget: _Budget, page: int | None
) -> Iterator[Block]:
    """A sheet as blocks of its table, the first under the sheet's name."""
    heading = title
    for block in table_blocks(rows):
        if budget.spent:
            return
        budget.used += len(block) + len(heading)
        yield heading_block(heading, block, page)
        heading = ""
