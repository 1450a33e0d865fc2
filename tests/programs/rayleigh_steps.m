function x = rayleigh_steps(A, x0)
  % normalised power iteration
  % test inputs: A=spd(5) x0=randn(5,1)
  x = x0 / norm(x0);
  for i = 1:6
    y = A * x;
    x = y / norm(y);
  end
end
