"""Front end: ``.m`` source text -> syntax tree (:mod:`.syntax`) via the Lark grammar
(:mod:`.parser`).  Diagnostics (file:line:col, caret) come from :mod:`linview.errors`."""
