"""Conversations kept on the server, per person: records (records.py), their answers' text
and status (answers.py), search over them (search.py), and the branch shown as the flat list
OpenAI's Conversations API sees (shown.py). The chat page and that API read the same records.
"""
