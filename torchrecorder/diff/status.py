"""The statuses of a diff's entries and the mark that shows each without colour."""

__all__ = ["MARKS", "STATUSES"]

#: every status, in the order reports list them
STATUSES = ("same", "changed", "added", "removed", "renamed", "wrapped")
#: the mark of each status in text and pictures (read without colour)
MARKS = {"same": " ", "changed": "~", "added": "+", "removed": "−", "renamed": "↦", "wrapped": "⊐"}
