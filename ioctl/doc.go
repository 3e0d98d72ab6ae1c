// Package ioctl is a thin, typed layer over the Linux block-device ioctls
// and sysfs files mdtool needs: device geometry (size, logical and physical
// block size, minimum and optimal I/O size), exclusive opens that detect
// busy devices, buffer flush, discard, zero-out, and dev_t helpers.
//
// Regular files stand in for block devices everywhere (tests, image
// files): they report their stat size, a 512-byte logical and a 4096-byte
// physical block size, and no I/O hints.
//
// Geometry can be overridden per path with [SetOverride], to test other
// geometries on image files; no environment variable is read.
//
// Everything here is Linux-only.
package ioctl
