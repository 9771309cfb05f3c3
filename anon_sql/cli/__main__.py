"""``python -m anon_sql.cli``: the ``anon-sql`` command."""
from .main import main

main()
