"""The Lark grammar of the linview dialect (``linview.lark``), shipped as package data."""
