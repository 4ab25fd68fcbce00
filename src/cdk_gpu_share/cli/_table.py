"""The command line's table printers: :mod:`cdk_gpu_share.core.text`'s, which ``plan`` uses too."""

from cdk_gpu_share.core.text import format_table, html_table

__all__ = ["format_table", "html_table"]
