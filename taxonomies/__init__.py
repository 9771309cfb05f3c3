"""The built-in taxonomies as data (ARX format CSV files); :mod:`anon_sql.data.builtin_taxonomies` reads them."""
