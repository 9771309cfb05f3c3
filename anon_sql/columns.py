"""Reserved column names of a release, shared by the compiler, the runner and the catalog (a leaf module: it
imports nothing, so the catalog can name them without depending on the compiler)."""
from __future__ import annotations

EC_ID = "ec_id"     # the equivalence class of a released row
SIZE = "__size"     # a class's record count in the classes / checks views
