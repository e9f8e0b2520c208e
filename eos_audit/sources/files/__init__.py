"""How input files reach the parsers, whatever their format.

`filesystems` lists and opens local paths and object stores (pyarrow.fs), `input_files` is the
driver's listing that accounts for every file, `file_source` is the one base of the Python data
sources that parse files on the executors (`text_lines`, `arrow_text` for text formats), and
`row_reference` locates a row by its file's id and its position instead of a text.
"""
