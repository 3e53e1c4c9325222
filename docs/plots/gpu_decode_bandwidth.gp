# CUDA decode attention bandwidth against context, one panel per batch size, with the H200's
# 4.8 TB/s HBM3e peak and the measured device-to-device copy rate as lines:
# gnuplot docs/plots/gpu_decode_bandwidth.gp (from the repository root), reading
# docs/plots/gpu_decode_bandwidth.dat.
set terminal pngcairo size 900,420 font 'sans,10' noenhanced
set output 'docs/plots/gpu_decode_bandwidth.png'
f = 'docs/plots/gpu_decode_bandwidth.dat'
hbm = 4.8
copy = 4.26
set logscale x 2
set xrange [6:170]
set xtics ('8k' 8, '32k' 32, '128k' 128)
set yrange [0:5.2]
set grid
set xlabel 'context (keys per row)'
set multiplot layout 1,3 title 'CUDA decode attention, H200, Hq/Hkv 32/8, d 128, bf16 K/V (run.sh 20, 2026-11-30)'
do for [i=0:2] {
  b = word('1 8 32', i + 1)
  set title sprintf('B = %s', b)
  if (i == 0) { set ylabel 'TB/s of unique K/V bytes'; set key bottom right font ',8' } \
  else { unset ylabel; unset key }
  plot hbm with lines lc 'black' dt 2 title 'HBM3e peak 4.8', \
       copy with lines lc 'gray40' dt 3 title 'copy 4.26', \
       f index i using 1:2 with linespoints lc 1 lw 2 pt 7 title 'kvforge dense', \
       f index i using 1:3 with linespoints lc 2 lw 2 pt 5 title 'kvforge paged', \
       f index i using 1:4 with linespoints lc 3 lw 2 pt 9 title 'torch flash', \
       f index i using 1:5 with linespoints lc 4 lw 2 pt 13 title 'cuDNN'
}
unset multiplot
