function [x1, P1] = kalman_step(A, H, Q, R, P0, x0, z)
  % one predict/update step of a Kalman filter
  % test inputs: A=contraction(4) H=randn(2,4) Q=spd(4) R=spd(2) P0=spd(4) x0=randn(4,1) z=randn(2,1)
  %#linview dynamic A Q P0
  x = A * x0;
  P = A * P0 * A' + Q;
  S = H * P * H' + R;
  K = P * H' / S;
  x1 = x + K * (z - H * x);
  P1 = (eye(rows(A)) - K * H) * P;
end
