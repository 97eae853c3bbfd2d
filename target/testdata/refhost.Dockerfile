# The reference host as a container image meeting the container adapter
# contract (docs/host-interface.md). Built FROM scratch: no registry is needed.
#   CGO_ENABLED=0 go build -o target/testdata/parley ./cmd/parley
#   docker build -f target/testdata/refhost.Dockerfile -t parley-refhost target/testdata
FROM scratch
COPY parley /parley
# The refhost keeps its state in a temporary directory; scratch has no /tmp.
WORKDIR /tmp
EXPOSE 8080 4480
# In a network namespace of its own the host serves the published ports; AGTP
# from outside then arrives from a non-loopback address, so only TLS rows can
# pass (plaintext is served to loopback peers only). The container target
# runs it in the machine's network instead, and sets these two to
# 127.0.0.1:0: the ready line then names the ports it chose.
ENV PARLEY_LISTEN=0.0.0.0:8080 PARLEY_AGTP_LISTEN=0.0.0.0:4480
ENTRYPOINT ["/parley", "refhost"]
