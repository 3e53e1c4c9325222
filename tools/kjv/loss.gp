# The built-in model's loss curve: gnuplot tools/kjv/loss.gp (from the repository root),
# reading models/kjv-7m-loss.csv (train.py's loss.csv) and writing models/kjv-7m-loss.png.
set terminal pngcairo size 720,420 font 'sans,10' noenhanced
set output 'models/kjv-7m-loss.png'
set datafile separator ','
set key top right
set grid
set xlabel 'training step (64 x 256 tokens)'
set ylabel 'cross-entropy (nats/token)'
set title 'kjv-7m: training and held-out loss (tools/kjv/train.py, seed 1611)'
plot 'models/kjv-7m-loss.csv' using 1:2 every ::1 with linespoints title 'train (mean over the last 50 steps)', \
     '' using 1:3 every ::1 with linespoints title 'held-out (Hebrews to Revelation)'
