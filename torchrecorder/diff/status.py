"""The statuses of a diff's entries and the mark that shows each without colour."""

__all__ = ["MARKS", "STATUSES"]

#: every status, in the order reports list them (``wrapper``: a part of a wrapper, the wrapper
#: module itself included, found on the side that has the wrapper: not a free addition)
STATUSES = ("same", "changed", "added", "removed", "renamed", "wrapped", "wrapper")
#: the mark of each status in text and pictures (read without colour)
MARKS = {"same": " ", "changed": "~", "added": "+", "removed": "−", "renamed": "↦", "wrapped": "⊐",
         "wrapper": "⊂"}
