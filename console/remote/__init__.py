"""A Bernstein task server as a Source and a Control (DESIGN §1, issue #9).

`client` speaks HTTP (httpx: auth headers, timeouts, what each refusal means),
`sse` reads the `/events` stream, `source` keeps a `State` in step with the
server, `control` maps operator actions onto the routes the server offers.
"""
