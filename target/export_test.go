package target

// DockerImage builds the reference host image for external tests.
var DockerImage = dockerImage
