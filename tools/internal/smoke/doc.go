// Package smoke holds the integration smoke test of the tool images built by
// tools/build-images.sh (build tag "integration"; needs a Docker daemon).
package smoke
