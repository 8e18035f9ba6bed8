"""Prompt templates, one module per role. Plain ``str.format`` templates: no logic here.

Every system prompt opens with a ``# Role: <name>`` line. It tells any model
which hat it wears, and lets transcripts and scripted test models tell the
roles apart without looking at the graph.
"""
