# The reference host as a container image meeting the container adapter
# contract (docs/host-interface.md). Built FROM scratch: no registry is needed.
#   CGO_ENABLED=0 go build -o target/testdata/parley ./cmd/parley
#   docker build -f target/testdata/refhost.Dockerfile -t parley-refhost target/testdata
FROM scratch
COPY parley /parley
# The refhost keeps its state in a temporary directory; scratch has no /tmp.
WORKDIR /tmp
EXPOSE 8080 4480
# AGTP from outside the container arrives from a non-loopback address, so
# only its TLS rows can pass there: plaintext is served to loopback peers only.
ENTRYPOINT ["/parley", "refhost", "--listen", "0.0.0.0:8080", "--agtp-listen", "0.0.0.0:4480"]
