"""The in-container end of an agent's LLM channel (stdlib only, any python3 >= 3.6).

    python3 forwarder.py SOCKET -- AGENT ARGV...

Listens on 127.0.0.1 (a free port), exports the base URLs of that port to the agent
(OPENAI_BASE_URL, OPENAI_API_BASE, GYMENVS_BASE_URL: http://127.0.0.1:PORT/v1; ANTHROPIC_BASE_URL,
GYMENVS_ORIGIN: http://127.0.0.1:PORT, as Anthropic clients take it), starts a relay process that copies every TCP connection byte
for byte to the unix socket SOCKET (bind-mounted from the host, which serves the episode's HTTP
endpoint there), then becomes the agent (exec). The container keeps network_mode "none": its own
loopback and the socket are all it has. The relay's pid is in GYMENVS_FORWARDER_PID.
"""

import os
import socket
import sys
import threading


def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def bridge(client, socket_path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def relay(listener, socket_path):
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=bridge, args=(client, socket_path), daemon=True).start()


def main(argv):
    if "--" not in argv or argv.index("--") != 2 or len(argv) < 4:
        sys.stderr.write("usage: forwarder.py SOCKET -- AGENT ARGV...\n")
        return 2
    socket_path, agent = argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the relay: detached from the agent's output, so the agent's exit ends that stream
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            relay(listener, socket_path)
        finally:
            os._exit(0)
    listener.close()
    origin = f"http://127.0.0.1:{port}"
    base_url = origin + "/v1"
    env = dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_API_BASE=base_url, GYMENVS_BASE_URL=base_url,
               ANTHROPIC_BASE_URL=origin, GYMENVS_ORIGIN=origin, GYMENVS_FORWARDER_PID=str(pid))
    try:
        os.execvpe(agent[0], agent, env)
    except OSError as exc:
        sys.stderr.write(f"forwarder: cannot start the agent {agent[0]!r}: {exc}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
