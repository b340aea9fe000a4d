// Package slurm holds the tests of the Slurm TaskProlog and Epilog in this
// folder.
package slurm
