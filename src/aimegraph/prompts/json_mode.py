"""Instructions for models without native tool calling (``tool_calling="json"``)."""

STRUCTURED = """\

## Reply format
Reply with one JSON object and nothing else, matching this JSON schema:
{schema}
"""

TOOLS = """\

## How to call tools
Reply with exactly one JSON object and nothing else:
{{"tool": "<tool name>", "args": {{...}}}}
(or a JSON list of such objects, to make several calls at once)
Available tools and their argument schemas:
{tools}
"""

PARSE_ERROR = """\
Your reply could not be used: {error}
Reply again with only the JSON object."""
