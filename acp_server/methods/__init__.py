"""The ACP methods gatewright serves, one module per family; `acp_server.dispatch` is their table.

    lifecycle   initialize, authenticate; the client's capabilities
    sessions    session/new, load, resume, fork, list, close, delete; the command list a session is sent
    prompt      session/prompt, session/cancel, `$/cancel_request` of a prompt
    config      session/set_mode, session/set_config_option

Every handler is `async def handler(agent, params) -> result`: `agent` is the connection's `GatewrightAgent`,
`params` the method's model from `acp_server.protocol.schema`, already read and checked at the connection boundary
(so a handler checks only what the schema cannot say: an absolute `cwd`, a known session, a mode that exists), and
the result a model (or an `rpc.Answer` of one, when a notification must follow the answer). Errors are the typed
`acp_server.errors` (`InvalidParams`, `ResourceNotFound`, ...), with one-line messages of our own.
"""
