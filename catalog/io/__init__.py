"""What every layer of remark uses, kept in the bottom layer: input errors and owned, atomic outputs.

``errors`` (``InputError``: one line naming file, row and field; exit 2), ``outputs`` (atomic files and
folders, the ownership marker, stale temporaries).
"""
