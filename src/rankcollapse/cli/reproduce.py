"""`rankcollapse reproduce`: placeholder until its issue lands; replaced by the owner of that issue."""
