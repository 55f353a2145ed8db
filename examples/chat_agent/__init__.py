"""The chat agent example: a conversation of any length in one durable workflow.

    wait for "message" → reply (model step, whole conversation) → publish "reply" → wait ...

`perdure dev --worker-module examples.chat_agent` serves it; `python -m examples.chat_agent
--id chat-1 "hello" /bye` sends messages and prints the replies.

- `workflow`: the workflow, its input, and where a long conversation continues as new;
- `__main__`: the client that sends messages one at a time and prints each reply.

The model is the research agent's offline one (`examples.research_agent.model`).
"""

from examples.chat_agent.workflow import BYE, MESSAGE_SIGNAL, Chat, ChatInput, chat_agent

__all__ = ["BYE", "MESSAGE_SIGNAL", "Chat", "ChatInput", "chat_agent"]
