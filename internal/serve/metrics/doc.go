// Package metrics keeps the engine's metrics and exposes them through
// github.com/prometheus/client_golang.
//
// The engine updates an Array on its hot path with plain atomic operations
// on the package's own counters, gauges and histograms (ObserveIO, IOError
// and BitmapFlush take no lock and do not allocate). Each Array is a
// prometheus.Collector that reads those values at scrape time, so a request
// costs the same whether anyone scrapes or not. A Registry is a
// prometheus.Registry holding the arrays; Registry.Handler serves it
// (promhttp), normally at /metrics.
//
// Every family has the label array="<name>":
//
//	mdtool_io_requests_total{op}             counter   requests completed
//	mdtool_io_bytes_total{op}                counter   bytes requested
//	mdtool_io_errors_total{op}               counter   requests failed
//	mdtool_io_request_duration_seconds{op}   histogram latency (LatencyBuckets)
//	mdtool_bitmap_flushes_total              counter   write-intent bitmap flushes
//	mdtool_bitmap_flush_bytes                histogram bytes per flush (FlushBytesBuckets)
//	mdtool_bitmap_dirty_chunks               gauge     dirty bitmap chunks
//	mdtool_array_state{state}                gauge     md array_state, 1 for the current one
//	mdtool_array_raid_disks                  gauge     md raid_disks
//	mdtool_array_degraded_members            gauge     md degraded
//	mdtool_sync_action{action}               gauge     md sync_action, 1 for the running one
//	mdtool_sync_completed_sectors            gauge     md sync_completed (done)
//	mdtool_sync_total_sectors                gauge     md sync_completed (total)
//	mdtool_sync_speed_bytes_per_second       gauge     md sync_speed (in bytes, not KiB)
//	mdtool_sync_mismatch_sectors             gauge     md mismatch_cnt
//
// op is one of read, write, flush, discard, write_zeroes.
package metrics
