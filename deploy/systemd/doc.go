// Package systemd holds the tests of the systemd units in this folder.
package systemd
